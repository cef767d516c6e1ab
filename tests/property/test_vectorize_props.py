"""Property test of the spill-access merge (issue 13, knob ``SpillVectorize``;
spill/vectorize.py): on random sequences of inserted 32- and 64-bit spill stores, reloads and
saves at random slots, from and into random registers (two values sometimes in one register),
with copies between them, the merged sequence leaves the registers and the spill array exactly
as the scalar one does, every merged access is aligned to its whole size and moves at most 16
bytes, and nothing but adjacent accesses of one kind merges.
"""

from __future__ import annotations

from hypothesis import given, settings
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
