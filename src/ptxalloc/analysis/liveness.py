"""Liveness (seed 000 phase 1; seed 002 "Live Range Computation").

Backward dataflow over blocks with a worklist; sets are Python int bitsets over virtual
register ids. Per block ``gen`` holds the registers used before any definition in the block and
``kill`` those the block definitely defines; then

    live_out(b) = union of live_in(s) over the successors s of b
    live_in(b)  = gen(b) | (live_out(b) & ~kill(b))

A guarded definition (``@%p mov %r1, 5``) does not kill: when the guard is false the old value
flows on. A partial definition (a vector component, a byte selector, a ``wgmma`` accumulator)
is also a use, so it keeps the value live too. A register read on some path before any
definition is live on entry to the function: it is treated as defined by an implicit
definition at entry (LLVM's IMPLICIT_DEF, SPEC section 3), so it gets a register like any other
value.

Every block is analysed, reachable or not: unreachable code is still emitted and allocated.
"""

from __future__ import annotations

from ..ir.cfg import CFG
from ..ir.instruction import Instruction


def instr_gen_kill(ins: Instruction) -> tuple[int, int]:
    """Bitsets of the registers an instruction reads and definitely writes."""
    gen = 0
    for u in ins.uses:
        gen |= 1 << u
    kill = 0
    if ins.guard < 0:
        for d in ins.defs:
            kill |= 1 << d
    return gen, kill


class Liveness:
    __slots__ = ("cfg", "gen", "kill", "live_in", "live_out", "_references")

    def __init__(self, cfg: CFG):
        self.cfg = cfg
        blocks = cfg.blocks
        n = len(blocks)
        gen = [0] * n
        kill = [0] * n
        for b in blocks:
            g = 0
            k = 0
            for ins in b.instrs:
                for u in ins.uses:
                    bit = 1 << u
                    if not k & bit:
                        g |= bit
                if ins.guard < 0:
                    for d in ins.defs:
                        k |= 1 << d
            gen[b.id] = g
            kill[b.id] = k
        live_in = [0] * n
        live_out = [0] * n
        # post-order (reverse RPO) first, then unreachable blocks
        order = cfg.rpo[::-1] + [b.id for b in blocks if not b.reachable]
        work = list(reversed(order))        # a stack: pops post-order first
        queued = [True] * n
        succs = [b.succs for b in blocks]
        preds = [b.preds for b in blocks]
        while work:
            b = work.pop()
            queued[b] = False
            out = 0
            for s in succs[b]:
                out |= live_in[s]
            live_out[b] = out
            new_in = gen[b] | (out & ~kill[b])
            if new_in != live_in[b]:
                live_in[b] = new_in
                for p in preds[b]:
                    if not queued[p]:
                        queued[p] = True
                        work.append(p)
        self.gen = gen
        self.kill = kill
        self.live_in = live_in
        self.live_out = live_out
        self._references: list[int] | None = None

    @property
    def references(self) -> list[int]:
        """Per block, the bitset of the registers it reads or defines: its ``gen`` and ``kill``
        sets and what it defines under a guard (a read that is not in ``gen`` follows a
        definition in the block). Found on first use."""
        if self._references is None:
            references = []
            for b in self.cfg.blocks:
                m = self.gen[b.id] | self.kill[b.id]
                for ins in b.instrs:
                    if ins.guard >= 0:
                        for d in ins.defs:
                            m |= 1 << d
                references.append(m)
            self._references = references
        return self._references

    def blocks_referencing(self, want: int) -> list:
        """The blocks that read or define a register of the bitset ``want``, in order: walks
        over the operands of a few values (``analyze``'s report: issue 16) skip the others."""
        references = self.references
        return [b for b in self.cfg.blocks if references[b.id] & want]

    def live_after(self, block_id: int) -> list[int]:
        """The live set after each instruction of a block."""
        b = self.cfg.blocks[block_id]
        live = self.live_out[block_id]
        out = [0] * len(b.instrs)
        for i in range(len(b.instrs) - 1, -1, -1):
            out[i] = live
            ins = b.instrs[i]
            if ins.guard < 0:
                for d in ins.defs:
                    live &= ~(1 << d)
            for u in ins.uses:
                live |= 1 << u
        return out

    def live_before(self, block_id: int) -> list[int]:
        """The live set before each instruction of a block."""
        b = self.cfg.blocks[block_id]
        after = self.live_after(block_id)
        out = []
        for ins, live in zip(b.instrs, after):
            if ins.guard < 0:
                for d in ins.defs:
                    live &= ~(1 << d)
            for u in ins.uses:
                live |= 1 << u
            out.append(live)
        return out

    @property
    def entry_live(self) -> int:
        """Registers live on entry: read before any definition on some path (implicit defs)."""
        return self.live_in[0] if self.live_in else 0
