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
"""

from __future__ import annotations

from ..ir.cfg import CFG
from ..ir.instruction import Instruction


def remove_redundant_spill_code(cfg: CFG, mask_of: dict[int, int],
                                clobbers: dict[int, int] | None = None) -> set[int]:
    """Ids (``id(instr)``) of the redundant spill stores and reloads of the function.

    ``mask_of[v]`` is the unit mask of register ``v``'s placement; ``clobbers`` maps
    ``id(instr)`` to extra units an instruction destroys (a call's caller-saved registers).
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
            avail = {p for p in avail if not p[0] & r}
            avail.add(pair)
            return avail
        if o is not None and o.stores:
            r = mask_of[ins.uses[0]]
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
