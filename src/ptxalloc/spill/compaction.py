"""Spill-slot compaction (seed 004 "Guidance consumption by the retry loop", sub_93C0B0: the
cost profile over spill slots and the gap relocation that patches STL/LDL offsets).

Run by the fat-point allocator after the spill slots have their offsets (:mod:`slots`):

1. **Cost profile.** Every spill store and reload (``st.local``/``ld.local`` on the spill array,
   the seed's opcodes 183/288; saves around calls and the callee-saved prologue/epilogue too) marks the 32-bit words of the frame it touches with its width in
   words (1, 2 or 4 — the alignment class the seed's ``cost_per_slot`` encodes) and adds its
   block frequency to their weight. A word no access touches is a gap.
2. **Gap relocation.** The words are walked in address order; each run of touched words moves
   down to the lowest free position at or above the end of the compacted part that keeps the
   run's alignment (its widest access: a 16-byte slot stays 16-byte aligned, so the run's start
   keeps its residue modulo its class). The relocation map gives each run its byte delta.
3. **Patch.** When the compacted frame (rounded to 16 bytes, as the frame is) is smaller, every
   store and reload of a moved run gets its new offset; the frame shrinks by the bytes saved.

Decisions (docs/decisions.md, "Fat-point allocator"): the seed's profile is a 256-entry stack
array (1 KB of frame) with a fixed shift for slots beyond it; ptxalloc profiles the whole frame
(at most 64 KB), which relocates the same way without the special case. Runs move whole, so
slots that share words (spill-slot coloring gave two values the same bytes) move together. Slot
coloring packs slots first-fit at aligned offsets, so on its output the pass usually finds no
gap and saves nothing; it reports what it saves, zero included.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.build import stored, width_bytes
from ..ir.cfg import CFG
from ..ir.operands import Mem


@dataclass
class Access:
    """One spill store or reload: the instruction, its address operand's index, the offset
    and width it touches (bytes) and its block's frequency."""

    ins: object
    pos: int                 # index of the Mem operand
    offset: int              # bytes
    width: int               # bytes
    freq: float


@dataclass
class Profile:
    """The cost profile of a frame: per 32-bit word the widest access class and the summed
    block frequency of the accesses that touch it."""

    words: int
    align: list[int] = field(default_factory=list)      # per word: widest access class (words)
    weight: list[float] = field(default_factory=list)   # per word: block-frequency weight


def accesses(cfg: CFG) -> list[Access]:
    """The spill stores and reloads of ``cfg`` with their offsets."""
    regs = cfg.fn.regs
    out = []
    for b in cfg.blocks:
        for ins in b.instrs:
            o = ins.origin
            if o is None or o.slot is None:
                continue
            for pos, op in enumerate(ins.ops):
                if type(op) is Mem:
                    break
            else:
                continue
            off = int(op.offset or "+0")
            v = stored(ins) if o.stores else ins.defs[0]
            out.append(Access(ins, pos, off, width_bytes(regs, v), b.freq))
    return out


def cost_profile(acc: list[Access], frame: int) -> Profile:
    """The cost profile (step 1 of the module docstring) of a ``frame``-byte frame."""
    words = (frame + 3) // 4
    prof = Profile(words, [0] * words, [0.0] * words)
    for a in acc:
        cls = max(1, (a.width + 3) // 4)
        first = a.offset // 4
        for w in range(first, min(words, (a.offset + a.width + 3) // 4)):
            prof.align[w] = max(prof.align[w], cls)
            prof.weight[w] += a.freq
    return prof


def relocation(prof: Profile) -> tuple[dict[int, int], int]:
    """Per word the byte delta its run moves down by, and the compacted size in words."""
    align = prof.align
    delta: dict[int, int] = {}
    gap = 0                              # end of the compacted part, in words
    i = 0
    n = prof.words
    while i < n:
        if not align[i]:
            i += 1
            continue
        j = i
        cls = 1
        while j < n and align[j]:
            cls = max(cls, align[j])
            j += 1
        new = gap + (i - gap) % cls      # lowest position >= gap with i's residue mod cls
        if new < i:
            for w in range(i, j):
                delta[w] = 4 * (i - new)
        else:
            new = i
        gap = new + (j - i)
        i = j
    return delta, gap


def compact_frame(cfg: CFG, frame: int) -> tuple[int, Profile]:
    """Compact the spill frame of ``cfg`` in place; returns the new frame size (bytes) and the
    cost profile it worked from."""
    acc = accesses(cfg)
    prof = cost_profile(acc, frame)
    if not acc:
        return frame, prof
    delta, words = relocation(prof)
    new_frame = (4 * words + 15) // 16 * 16
    if new_frame >= frame or not delta:
        return frame, prof
    for a in acc:
        d = delta.get(a.offset // 4, 0)
        if d:
            op = a.ins.ops[a.pos]
            a.ins.ops[a.pos] = Mem(op.base, f"+{a.offset - d}", op.rest, op.suffix)
    return new_frame, prof
