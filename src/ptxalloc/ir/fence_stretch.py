"""The stretch of a ``wgmma.fence`` over the control-flow graph (PTX ISA 9.7.15.5.1
``wgmma.fence``; docs/checker.md, "The wgmma fence"; docs/decisions.md, "The wgmma fence
over the CFG"): one definition for the checker's rule (:mod:`ptxalloc.verify.fences`) and
for what keeps the allocator inside it (the interference graph's fence edges and slot
promotion's busy units, :func:`ptxalloc.analysis.interference.fenced_after`).

A register that a ``wgmma.mma_async`` accesses asynchronously (its accumulator, a register A
fragment) must be accessed (written or read) before the ``wgmma.fence`` that precedes it. An
access at instruction ``p`` therefore breaks the rule for a ``wgmma.mma_async`` ``W`` exactly
when some path runs from just after ``p`` to ``W`` without passing a fence that runs — an
unguarded ``wgmma.fence`` (the callers pass only those: a guarded one is a branch over a
fence) — so that on that path the last fence before ``W`` (or the function's start) comes
before the access. That is the forward form
("written since the last fence on some path", meet = union) read backwards, and it is what
:func:`fence_free_ahead` computes: per instruction, the union of the marks of the wgmmas
reachable from just after it along fence-free paths — a backward may-dataflow over the blocks
(``in = marks before the block's first fence | (out, when the block has no fence)``, ``out =``
the union of the successors' ``in``), iterated to its fixpoint, then one walk back through each
block that has anything ahead. A back edge or a branch into the stretch, a branch over a fence,
are followed like any other edge; on straight-line code the result is the text-order stretch
(from the last fence before the wgmma, or the function's start).

Blocks are given as instruction ranges and successor lists, so that the allocator's
:class:`~ptxalloc.ir.cfg.CFG` and the checker's own :class:`~ptxalloc.verify.blocks.Blocks`
both use it (the checker shares the definition, not the allocator's analyses).
"""

from __future__ import annotations

from typing import Sequence


def fence_free_ahead(n: int, ranges: Sequence[tuple[int, int]], succs: Sequence[Sequence[int]],
                     fences: set[int], marks: dict[int, int]) -> list[int]:
    """Per instruction position (0 .. ``n``-1), the union of ``marks[w]`` over the positions
    ``w`` of the ``wgmma.mma_async`` reachable from just after the instruction along a path
    that passes no position in ``fences`` (the instruction itself is not ahead of itself; a
    wgmma reached is, and the path may go on past it). ``ranges[b]`` is block ``b``'s
    ``(first position, count)``, ``succs[b]`` its successor blocks."""
    ahead = [0] * n
    if not marks:
        return ahead
    nb = len(ranges)
    head = [0] * nb                 # the marks from the block's start to its first fence
    fenced = [False] * nb           # whether the block has a fence
    touched = [False] * nb          # whether the block has a fence or a mark
    for b, (first, count) in enumerate(ranges):
        for p in range(first, first + count):
            if p in fences:
                fenced[b] = touched[b] = True
                break
            m = marks.get(p)
            if m is not None:
                head[b] |= m
                touched[b] = True
    preds: list[list[int]] = [[] for _ in range(nb)]
    for b, out in enumerate(succs):
        for s in out:
            preds[s].append(b)
    into = head[:]                  # what is ahead at the block's start
    after = [0] * nb                # what is ahead at its end
    work = [b for b in range(nb) if into[b]]
    while work:
        s = work.pop()
        got = into[s]
        for b in preds[s]:
            if got & ~after[b]:
                after[b] |= got
                if not fenced[b]:
                    new = after[b] | head[b]
                    if new != into[b]:
                        into[b] = new
                        work.append(b)
    for b, (first, count) in enumerate(ranges):
        cur = after[b]
        if not cur and not touched[b]:
            continue
        for p in range(first + count - 1, first - 1, -1):
            ahead[p] = cur
            if p in fences:
                cur = 0
            else:
                m = marks.get(p)
                if m is not None:
                    cur |= m
    return ahead
