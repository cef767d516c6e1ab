"""Spill slots moved into registers the allocation left free (seed 002 post-allocation
peephole, "Spill Code Optimization"; issue 13, the after-allocation waste).

Spill decisions are made round by round, before the final coloring is known; once it is, some
spilled values turn out to have had room after all: a register of the value's shape that no
register of the function occupies anywhere the value sits in its slot. Such a slot is promoted:
each store ``st.local [S], R`` becomes ``mov F, R`` and each reload ``ld.local R', [S]`` becomes
``mov R', F``, annotated ``//@move`` — no local memory at all. The checker proves the copies
like any other.

A slot qualifies when it is accessed only by spill stores and reloads of one value (not the
saves around calls, not the callee-saved prologue) of a general register. ``F`` must be free at
every point where the slot is live (from each store to the reloads it reaches: the slot
liveness of :mod:`slots`) and at each store: no register placed on its units is live after the
point or defined there, and no call there destroys it. Slots are promoted greedily, the most
accessed (by block frequency) first. Knob ``SpillSlotsToRegisters``: 1 uses registers below
the allocation's high-water mark only, so the function's register count does not change; 2
(the default) any register of the budget, as ptxas does when it spills: a function that spills
with registers of its budget unused (fat-point's coloring can leave some) turns slots into
registers up to the budget, and reports the registers so used.
"""

from __future__ import annotations


from ..analysis.interference import fenced_after
from ..analysis.liveness import Liveness
from ..ir import build
from ..ir.cfg import CFG
from ..ir.edits import Edit, EditKind, Slot
from ..ir.instruction import Instruction
from ..ir.registers import RegTable
from ..target.units import GPR, RegFile, Shape
from ..util import bits
from .slots import slot_liveness

_VALUE_ACCESSES = frozenset((EditKind.SPILL, EditKind.RELOAD))


def promote_slots(cfg: CFG, regs: RegTable, start: dict[int, int], shapes: dict[int, Shape],
                  regfile: RegFile, clobbers: dict[int, int], up_to_budget: bool = False,
                  forbidden: int = 0, busy: list[int] | None = None
                  ) -> tuple[dict[int, Instruction], dict[int, int]]:
    """The copies replacing the accesses of every promoted slot (``id(instr) -> copy``) and
    the start unit of each new register that holds a promoted slot; with ``up_to_budget``
    any register of ``regfile``, else only those below the high-water mark; never the units
    ``forbidden`` (a ``.func``'s callee-saved registers its prologue does not save).
    ``busy`` (:func:`busy_units`, computed when not given) gets the promoted registers' units
    added where they are live."""
    accesses: dict[Slot, list[Instruction]] = {}
    refused: set[Slot] = set()
    for ins in cfg.instrs:
        o = ins.origin
        if o is None or o.slot is None:
            continue
        accesses.setdefault(o.slot, []).append(ins)
        reg = build.stored(ins) if o.stores else ins.defs[0]
        if o.kind not in _VALUE_ACCESSES or reg not in start or shapes[reg].file != GPR:
            refused.add(o.slot)
    eligible = [s for s in accesses if s not in refused]
    if not eligible:
        return {}, {}
    top = max((s + shapes[v].units for v, s in start.items() if shapes[v].file == GPR),
              default=0)
    # units below the high-water mark, or every unit of the budget
    limit = regfile.size(Shape(GPR, 1, 1)) if up_to_budget else top + top % 2
    key_index = {s: i for i, s in enumerate(accesses)}
    if busy is None:
        busy = busy_units(cfg, start, shapes, clobbers)
    points = _slot_points(cfg, key_index)
    freq = [cfg.blocks[cfg.block_of[i]].freq for i in range(len(cfg.instrs))]
    index_of = {id(ins): i for i, ins in enumerate(cfg.instrs)}

    def weight(slot: Slot) -> float:
        return sum(freq[index_of[id(ins)]] for ins in accesses[slot])

    copies: dict[int, Instruction] = {}
    new_starts: dict[int, int] = {}
    for slot in sorted(eligible, key=weight, reverse=True):
        first = accesses[slot][0]
        value_reg = build.stored(first) if first.origin.stores else first.defs[0]
        shape = shapes[value_reg]
        where = points[key_index[slot]]
        taken = forbidden
        for p in where:
            taken |= busy[p]
        place = next(((s, m) for s, m in regfile.placements(shape)
                      if s + shape.units <= limit and not m & taken), None)
        if place is None:
            continue
        s, m = place
        for p in where:
            busy[p] |= m
        f = regs.like(value_reg, f"{regs.names[value_reg]}$f")
        new_starts[f] = s
        for ins in accesses[slot]:
            o = ins.origin
            mv = (build.copy(regs, f, build.stored(ins), ins.line) if o.stores
                  else build.copy(regs, ins.defs[0], f, ins.line))
            mv.origin = Edit(EditKind.MOVE, o.value)
            copies[id(ins)] = mv
    return copies, new_starts


def busy_units(cfg: CFG, start: dict[int, int], shapes: dict[int, Shape],
                clobbers: dict[int, int]) -> list[int]:
    """Per instruction id, the general-register units occupied there: by the registers live
    after it, those it defines, what a call destroys, and the registers a
    ``wgmma.mma_async`` reachable from there along a path with no ``wgmma.fence`` accesses
    asynchronously (:func:`~ptxalloc.analysis.interference.fenced_after`, the checker's
    stretch over the CFG): a copy into a promoted register may not be written there."""
    mask_of = [0] * len(cfg.fn.regs)       # register -> its units (0: none, or a predicate)
    for v, s in start.items():
        if shapes[v].file == GPR:
            mask_of[v] = shapes[v].mask(s)
    placed = 0                              # the registers holding units
    for v, m in enumerate(mask_of):
        if m:
            placed |= 1 << v
    liveness = Liveness(cfg)
    busy = [0] * len(cfg.instrs)
    # the units of the live registers, kept from one point to the next: only the registers
    # entering or leaving the live set (a few) change them; a unit stays occupied while any
    # live register holds it (coalesced copies share units), hence a count per unit
    held = [0] * (max(mask_of, default=0).bit_length())
    occupied = 0
    before = 0
    for b in cfg.blocks:
        for k, (ins, live) in enumerate(zip(b.instrs, liveness.live_after(b.id))):
            live &= placed
            if live != before:
                for v in bits(live ^ before):
                    m = mask_of[v]
                    if live >> v & 1:
                        occupied |= m
                        while m:
                            low = m & -m
                            held[low.bit_length() - 1] += 1
                            m ^= low
                    else:
                        while m:
                            low = m & -m
                            u = low.bit_length() - 1
                            held[u] -= 1
                            if not held[u]:
                                occupied ^= low
                            m ^= low
                before = live
            units = occupied | clobbers.get(id(ins), 0)
            for d in ins.defs:
                units |= mask_of[d]
            busy[b.first + k] = units
    for p, units in enumerate(fenced_after(cfg, mask_of)):
        busy[p] |= units
    return busy


def _slot_points(cfg: CFG, key_index: dict[Slot, int]) -> list[list[int]]:
    """Per slot, the instruction ids where it is live after the instruction, and its stores."""
    events, live_out = slot_liveness(cfg, key_index)
    points: list[list[int]] = [[] for _ in key_index]
    for b, ev in zip(cfg.blocks, events):
        live = live_out[b.id]
        for k in range(len(ev) - 1, -1, -1):
            ins, i, is_store = ev[k]
            p = b.first + k
            for j in bits(live):
                points[j].append(p)
            if i < 0:
                continue
            if is_store:
                if not live >> i & 1:
                    points[i].append(p)
                live &= ~(1 << i)
            else:
                live |= 1 << i
    return points


def forward_reloads(cfg: CFG, regs: RegTable, start: dict[int, int], shapes: dict[int, Shape],
                    regfile: RegFile, clobbers: dict[int, int], forbidden: int = 0,
                    busy: list[int] | None = None
                    ) -> tuple[dict[int, list[Instruction]], dict[int, Instruction],
                               dict[int, int]]:
    """Reloads served by a register free since the previous access of their slot (knob
    ``SpillReloadsToRegisters``): where a slot is accessed at ``q`` (a spill store of ``H`` or
    a reload into ``H``) and reloaded at a later ``p`` of the same extended block (a block
    continues its only predecessor), with no access of the slot between, and a register ``F``
    of the value's shape is free at every point from ``q`` to ``p`` (no register placed on its
    units live after or defined at one, no call destroying it), ``mov F, H`` goes right after
    ``q`` and the reload becomes ``mov R, F`` — a local-memory load less, one copy more (none
    when ``F`` is ``H``'s or ``R``'s register: such copies are dropped). Whole slots are
    :func:`promote_slots`'s; this serves what it leaves, one interval at a time, in block
    order; never in the units ``forbidden``; ``busy`` as :func:`promote_slots` leaves it (the
    instructions are the same, one for one). Returns the copies to insert after instructions
    (``id(q) -> copies``: an access can serve a reload in each of its block's successors), the
    copies replacing reloads (``id(p) -> copy``) and the start unit of each new register."""
    if busy is None:
        busy = busy_units(cfg, start, shapes, clobbers)
    after: dict[int, list[Instruction]] = {}
    copies: dict[int, Instruction] = {}
    new_starts: dict[int, int] = {}
    refused: set = set()
    for ins in cfg.instrs:
        o = ins.origin
        if o is not None and o.slot is not None and o.kind not in _VALUE_ACCESSES:
            refused.add(o.slot)                 # saves around calls, callee-saved registers
    # per slot: (q, holder, the point ranges [lo, hi) crossed in earlier blocks, the first
    # point of the current block's range); per block id, that table at its end
    at_end: dict[int, dict] = {}
    for b in cfg.blocks:
        end = b.first + len(b.instrs)
        last: dict = {}
        if len(b.preds) == 1 and b.preds[0] in at_end:
            last = {slot: (q, held, done, b.first)
                    for slot, (q, held, done) in at_end[b.preds[0]].items()}
        for k, ins in enumerate(b.instrs):
            p = b.first + k
            o = ins.origin
            if o is None or o.slot is None or o.slot in refused:
                continue
            holder = build.stored(ins) if o.stores else ins.defs[0]
            if holder not in start or shapes[holder].file != GPR:
                last.pop(o.slot, None)
                continue
            prev = last.get(o.slot)
            last[o.slot] = (p, holder, (), p)
            if o.stores or prev is None or shapes[prev[1]] != shapes[holder]:
                continue
            q, held, done, lo = prev
            ranges = done + ((lo, p),)
            shape = shapes[holder]
            taken = forbidden
            for r_lo, r_hi in ranges:
                for i in range(r_lo, r_hi):
                    taken |= busy[i]
            place = next(((s, m) for s, m in regfile.placements(shape) if not m & taken), None)
            if place is None:
                continue
            s, m = place
            for r_lo, r_hi in ranges:
                for i in range(r_lo, r_hi):
                    busy[i] |= m
            f = regs.like(holder, f"{regs.names[holder]}$r")
            new_starts[f] = s
            first = build.copy(regs, f, held, ins.line)
            first.origin = Edit(EditKind.MOVE, o.value)
            after.setdefault(id(cfg.instrs[q]), []).append(first)
            second = build.copy(regs, holder, f, ins.line)
            second.origin = Edit(EditKind.MOVE, o.value)
            copies[id(ins)] = second
        at_end[b.id] = {slot: (q, held, done + ((lo, end),))
                        for slot, (q, held, done, lo) in last.items()}
    return after, copies, new_starts
