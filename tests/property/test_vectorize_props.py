"""Property tests of the spill-access merge (issue 13, knob ``SpillVectorize``;
spill/vectorize.py): on random sequences of inserted 32- and 64-bit spill stores, reloads and
saves at random slots, from and into random registers (two values sometimes in one register),
with copies between them, the merged sequence leaves the registers and the spill array exactly
as the scalar one does, every merged access is aligned to its whole size and moves at most 16
bytes, and nothing but adjacent accesses of one kind merges. And of the slot placement that
makes merges possible (spill/slots.py with ``vectorize``): on random straight-line spill code
it never grows the frame, and no slot's bytes are overwritten while it is live.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ptxalloc.ir import build
from ptxalloc.ir.edits import Edit, EditKind, Merged, value_slot
from ptxalloc.ir.operands import Mem, Reg, Sym, Vec
from ptxalloc.ir.registers import RegClass
from ptxalloc.ptx import parse
from ptxalloc.spill.vectorize import merge_spill_accesses

KINDS = (EditKind.SPILL, EditKind.RELOAD, EditKind.SAVE, EditKind.RESTORE)

# one step: (kind index, 64-bit?, slot offset in words, register), mostly spill stores and
# reloads at a few slots (so that runs overlap), or now and then ("copy", dst, src)
access = st.tuples(st.sampled_from((0, 0, 0, 1, 1, 2, 3)), st.booleans(), st.integers(0, 5),
                   st.integers(0, 5))
step = st.one_of(access, access, access,
                 st.tuples(st.just("copy"), st.integers(0, 5), st.integers(0, 5)))


def _function():
    fn = parse(".version 7.0\n.target sm_80\n.address_size 64\n\n"
               ".visible .entry k()\n{\n\tret;\n}\n").functions[0]
    r32 = [fn.regs.add(f"%a{i}", ".b32", RegClass.GPR32) for i in range(6)]
    r64 = [fn.regs.add(f"%d{i}", ".b64", RegClass.GPR64) for i in range(6)]
    return fn, r32, r64


def _body(fn, r32, r64, steps):
    body = []
    for s in steps:
        if s[0] == "copy":
            body.append(build.copy(fn.regs, r32[s[1]], r32[s[2]]))
            continue
        kind = KINDS[s[0]]
        wide, word, reg = s[1], s[2], s[3]
        v = (r64 if wide else r32)[reg]
        off = (word - word % 2) * 4 if wide else word * 4
        store = kind in (EditKind.SPILL, EditKind.SAVE)
        ins = (build.spill_store if store else build.spill_reload)(
            fn.regs, v, "__ptxalloc_spill")
        ins.ops[0 if store else 1] = Mem(Sym("__ptxalloc_spill"), f"+{off}")
        ins.origin = Edit(kind, v, value_slot(v))
        ins.comment = f"//@{kind.value} {fn.regs.names[v]}#{v}"
        body.append(ins)
    return body


def _run(body, names) -> tuple[dict, dict]:
    """Registers (by physical name) and spill-array bytes after ``body``, from registers
    holding their own names and an array of unknown bytes."""
    regs: dict = {}
    mem: dict = {}

    def get(name):
        return regs.get(name, (name,))

    for ins in body:
        if ins.opcode.startswith("mov"):
            regs[names(ins.ops[0].v)] = get(names(ins.ops[1].v))
            continue
        store = ins.opcode.startswith("st.")
        mem_op, data = (ins.ops[0], ins.ops[1]) if store else (ins.ops[1], ins.ops[0])
        items = data.items if type(data) is Vec else [data]
        size = int(ins.opcode[-2:]) // 8
        off = int(mem_op.offset)
        if store:
            values = [get(names(r.v)) for r in items]       # every read before any write
            for k, val in enumerate(values):
                for b in range(size):
                    mem[off + k * size + b] = (val, b)
        else:
            for k, r in enumerate(items):
                regs[names(r.v)] = tuple(mem.get(off + k * size + b, ("?", off + k * size + b))
                                         for b in range(size))
    return regs, mem


@settings(max_examples=500, deadline=None)
@given(st.lists(step, min_size=1, max_size=14), st.integers(2, 6))
def test_merging_changes_no_register_and_no_byte(steps, spread):
    fn, r32, r64 = _function()
    body = _body(fn, r32, r64, steps)

    def names(v):       # values share physical registers when spread is small
        return ("%RD" if fn.regs.classes[v] == RegClass.GPR64 else "%R") + str(v % spread)

    merged, saved = merge_spill_accesses(list(body), fn.regs, names)
    assert len(merged) == len(body) - saved
    assert _run(merged, names) == _run(body, names)
    for ins in merged:
        if type(ins.origin) is Merged:
            items = ins.ops[1 if ins.opcode.startswith("st.") else 0].items
            size = int(ins.opcode[-2:]) // 8
            mem = ins.ops[0 if ins.opcode.startswith("st.") else 1]
            assert len(items) in (2, 4) and len(items) * size <= 16
            assert int(mem.offset) % (len(items) * size) == 0
            assert len({e.kind for e in ins.origin.edits}) == 1
            assert all(type(r) is Reg for r in items)


# -- slot placement (spill/slots.py with vectorize) --------------------------------------------

# one event: (store?, value 0..7, 64-bit?) or None for an instruction that is no spill access
# (few values, so that runs, groups and slots sharing bytes meet often)
spill = st.tuples(st.booleans(), st.integers(0, 3), st.booleans())
event = st.one_of(st.none(), spill, spill, spill)


def _slot_body(events):
    from ptxalloc.ir.edits import value_slot
    fn = parse(".version 7.0\n.target sm_80\n.address_size 64\n\n"
               ".visible .entry k()\n{\n\tret;\n}\n").functions[0]
    r32, r64 = [], []
    for i in range(4):      # ids interleaved: slots of both sizes in either layout order
        r32.append(fn.regs.add(f"%a{i}", ".b32", RegClass.GPR32))
        r64.append(fn.regs.add(f"%d{i}", ".b64", RegClass.GPR64))
    body, sizes, accesses = [], {}, []
    for e in events:
        if e is None:
            body.append(build.copy(fn.regs, r32[0], r32[1]))
            continue
        store, i, wide = e
        v = (r64 if wide else r32)[i]
        slot = value_slot(v)
        sizes[slot] = 8 if wide else 4
        ins = (build.spill_store if store else build.spill_reload)(fn.regs, v,
                                                                   "__ptxalloc_spill")
        ins.origin = Edit(EditKind.SPILL if store else EditKind.RELOAD, v, slot)
        body.append(ins)
        accesses.append((ins, store, slot, sizes[slot]))
    fn.body[0:0] = body
    return fn, sizes, accesses


@settings(max_examples=500, deadline=None)
@given(st.lists(event, min_size=1, max_size=24))
# a group placed after a slot that interferes with its second member only: %d0 is live across
# the store of %a2, and the reloads of %a1 and %a2 make them a group
@example([(True, 0, True), (True, 2, False), (False, 0, True), (True, 1, False),
          (False, 1, False), (False, 2, False)])
def test_slots_side_by_side_never_grow_the_frame_nor_overlap_live_slots(events):
    from ptxalloc.ir.cfg import CFG
    from ptxalloc.spill.slots import assign_slots
    fn, sizes, _ = _slot_body(events)
    plain = assign_slots(CFG(fn), sizes, "__ptxalloc_spill")
    fn, sizes, accesses = _slot_body(events)
    frame = assign_slots(CFG(fn), sizes, "__ptxalloc_spill", vectorize=True)
    assert frame <= plain
    # straight-line code: a reload of a slot stored earlier finds that store's bytes intact
    held: dict[int, object] = {}
    for ins, store, slot, size in accesses:
        mem = ins.ops[0] if store else ins.ops[1]
        off = int(mem.offset)
        assert off % size == 0 and off + size <= frame
        if store:
            for b in range(size):
                held[off + b] = slot
        elif any(a[2] == slot and a[1] for a in accesses[:accesses.index((ins, store, slot,
                                                                          size))]):
            assert all(held.get(off + b) == slot for b in range(size)), (slot, off)
