"""Lazy reload: drop the reloads (and stores) that are redundant once registers are known
(seed 000 phase 6, seed 002 "Eliminate Redundant Reloads"; SPEC section 5).

Reloads are placed as late as possible — immediately before each use — by the spill rewrite.
After coloring, a forward availability dataflow over the allocated function tracks which
(register placement, slot) pairs hold equal bits: a store ``st [s], R`` or a reload ``ld R, [s]``
makes ``(R, s)`` available; any other write to a unit of R, or a store to s from another
register, ends it; at a join only what holds on every incoming path survives (meet =
intersection). A reload of ``s`` into ``R`` where ``(R, s)`` is available, or a store of ``R``
into ``s`` where it is, changes nothing and is removed. The checker proves the result like any
other allocation.

Two more clean-ups after allocation (seed 002 post-allocation peephole and DCE; issue 13), each
switched by a knob (:mod:`ptxalloc.alloc.knobs`):

* ``SpillReloadFromRegister``: a reload of ``s`` into ``R`` where another register ``R'`` of the
  same width still holds ``s``'s bits (``(R', s)`` available) becomes ``mov R, R'``, annotated
  ``//@move``: a register copy instead of a local-memory load (:func:`reload_moves`).
* ``SpillDeadStores``: a store to a slot that no reload reads before the slot is written again
  (the slot is dead after it, by the slot liveness of :mod:`slots`) is removed
  (:func:`dead_spill_stores`): the store of a value whose every reload was dropped.
"""

from __future__ import annotations

from ..ir import build
from ..ir.cfg import CFG
from ..ir.edits import Edit, EditKind
from ..ir.instruction import Instruction
from ..ir.registers import RegTable
from .slots import slot_liveness

#: the reloads that may become register copies: of a value (not a callee-saved register)
_VALUE_RELOADS = frozenset((EditKind.RELOAD, EditKind.RESTORE))


def remove_redundant_spill_code(cfg: CFG, mask_of: dict[int, int],
                                clobbers: dict[int, int] | None = None,
                                moves: dict[int, int] | None = None) -> set[int]:
    """Ids (``id(instr)``) of the redundant spill stores and reloads of the function.

    ``mask_of[v]`` is the unit mask of register ``v``'s placement; ``clobbers`` maps
    ``id(instr)`` to extra units an instruction destroys (a call's caller-saved registers).
    With ``moves`` (a dict to fill), each reload of a value whose slot's bits another register
    of the same width, disjoint from the destination, still holds is entered as ``id(instr)
    -> that register's unit mask`` (:func:`reload_moves` turns them into copies).
    """
    blocks = cfg.blocks
    clobbers = clobbers or {}

    def transfer(ins: Instruction, avail: frozenset | set, redundant: set | None):
        """The available (placement, slot) pairs after ``ins``; records ``ins`` in
        ``redundant`` (when given) if it changes nothing."""
        o = ins.origin
        if o is not None and o.loads:
            r = mask_of[ins.defs[0]]
            pair = (r, o.slot)
            if pair in avail:
                if redundant is not None:
                    redundant.add(id(ins))
                return avail
            if redundant is not None and moves is not None and o.kind in _VALUE_RELOADS:
                width = r.bit_count()
                holders = [held for held, slot in avail
                           if slot == o.slot and not held & r and held.bit_count() == width]
                if holders:             # the lowest: the same copy whatever the set's order
                    moves[id(ins)] = min(holders)
            avail = {p for p in avail if not p[0] & r}
            avail.add(pair)
            return avail
        if o is not None and o.stores:
            r = mask_of[build.stored(ins)]
            pair = (r, o.slot)
            if pair in avail:
                if redundant is not None:
                    redundant.add(id(ins))
                return avail
            avail = {p for p in avail if p[1] != o.slot}
            avail.add(pair)
            return avail
        killed = clobbers.get(id(ins), 0)
        for d in ins.defs:
            killed |= mask_of.get(d, 0)
        if killed and avail:
            avail = {p for p in avail if not p[0] & killed}
        return avail

    def entry_state(b) -> set:
        """The pairs available on entry to block ``b``: those on every reached predecessor."""
        known = [out[p] for p in b.preds if out[p] is not None]
        if b.id == 0 or not known:
            return set()
        avail = set(known[0])
        for x in known[1:]:
            avail &= x
        return avail

    out: list[set | None] = [None] * len(blocks)     # None: not reached yet (top)
    order = cfg.rpo + [b.id for b in blocks if not b.reachable]
    changed = True
    while changed:
        changed = False
        for bid in order:
            b = blocks[bid]
            avail = entry_state(b)
            for ins in b.instrs:
                avail = transfer(ins, avail, None)
            if out[bid] is None or avail != out[bid]:
                out[bid] = set(avail)
                changed = True
    redundant: set[int] = set()
    for b in blocks:
        avail = entry_state(b)
        for ins in b.instrs:
            avail = transfer(ins, avail, redundant)
    return redundant


def reload_moves(fn_regs: RegTable, cfg: CFG, moves: dict[int, int] | None,
                 mask_of: dict[int, int]) -> dict[int, Instruction]:
    """The ``mov R, R'`` replacing each reload of ``moves`` (from
    :func:`remove_redundant_spill_code`): ``id(reload) -> copy``, annotated as a ``move`` of
    the reloaded value. ``R'`` is named by any register placed on its units with the
    destination's class."""
    if not moves:
        return {}
    classes = fn_regs.classes
    holder: dict[tuple, int] = {}
    for v, m in mask_of.items():
        holder.setdefault((m, classes[v], fn_regs.vec[v]), v)
    out = {}
    for ins in cfg.instrs:
        held = moves.get(id(ins))
        if held is None:
            continue
        d = ins.defs[0]
        src = holder.get((held, classes[d], fn_regs.vec[d]))
        if src is None:
            continue
        mv = build.copy(fn_regs, d, src, ins.line)
        mv.origin = Edit(EditKind.MOVE, ins.origin.value)
        out[id(ins)] = mv
    return out


def dead_spill_stores(cfg: CFG) -> set[int]:
    """Ids of the spill stores whose slot no reload reads before it is written again."""
    keys = {}
    for ins in cfg.instrs:
        o = ins.origin
        if o is not None and o.slot is not None:
            keys.setdefault(o.slot, len(keys))
    if not keys:
        return set()
    events, live_out = slot_liveness(cfg, keys)
    dead: set[int] = set()
    for b, ev in zip(cfg.blocks, events):
        live = live_out[b.id]
        for ins, i, is_store in reversed(ev):
            if i < 0:
                continue
            bit = 1 << i
            if is_store:
                if not live & bit:
                    dead.add(id(ins))
                live &= ~bit
            else:
                live |= bit
    return dead
