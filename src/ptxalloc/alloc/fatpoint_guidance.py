"""Spill guidance for the fat-point allocator's SPILL retries (seed 004 "Spilling Overview":
sub_96D940 spill guidance, per-class priority queues over live-range pressure; "Guidance
consumption by the retry loop": the register target ``target - 1`` descent).

Given a register file and a register target T, the guidance says which values to spill so that
no program point needs more than T registers of that file:

* the *excess points* are the instructions where the registers that must coexist (the values
  live after the instruction and the ones it defines, as :mod:`ptxalloc.analysis.pressure`
  counts them, a node's whole shape once) exceed T;
* each spillable node (finite cost, not precolored) *relieves* the excess points where it is
  live but not read or written by the instruction there — at its own definitions and uses a
  spilled value still needs a register, for the short temporary that replaces it;
* one priority queue per register file (the seed's per-class queues) orders the candidates by
  spill cost over the excess they relieve, ``cost / sum(min(units, excess))``; the cheapest is
  taken, the excess of its points drops by its width, the others are re-keyed lazily, until no
  point is over the target or nothing left can relieve one.

The pressure at a point is only a lower bound on what coloring needs (alignment, and graphs that
are not chordal), so a SPILL attempt guided for target T can still fail; the retry loop then asks
again for T - 1.
"""

from __future__ import annotations

import heapq
import math

from ..target.units import GPR
from ..util import bits
from .problem import Problem


def excess_points(p: Problem, file: int, target_units: int, excluded: set[int]):
    """The points over the target: a list of (excess units, live nodes, nodes the instruction
    itself reads or writes)."""
    an = p.analysis
    cfg = an.cfg
    press = an.pressure.gpr if file == GPR else an.pressure.pred
    scale = 2 if file == GPR else 1
    liveness = an.liveness
    find = p.find
    shape = p.shape
    pinned = p.pinned
    points = []
    for b in cfg.blocks:
        after = None
        for k, ins in enumerate(b.instrs):
            if press[b.first + k] * scale <= target_units:
                continue
            if after is None:
                after = liveness.live_after(b.id)
            live = after[k]
            for d in ins.defs:
                live |= 1 << d
            nodes = set()
            for v in bits(live):
                if v in pinned:
                    continue
                n = find(v)
                sh = shape[n]
                if sh is not None and sh.file == file and n not in excluded:
                    nodes.add(n)
            total = sum(shape[n].units for n in nodes)
            if total <= target_units:
                continue
            local = {find(v) for v in ins.defs + ins.uses}
            points.append((total - target_units, nodes, local))
    return points


def spill_guidance(p: Problem, file: int, target_units: int,
                   excluded: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Nodes of ``file`` to spill, cheapest relief first, so that the pressure of the nodes not
    in ``excluded`` stays within ``target_units`` wherever spilling can bring it there."""
    points = excess_points(p, file, target_units, set(excluded))
    if not points:
        return []
    cost = p.cost
    shape = p.shape
    fixed = p.fixed
    excess = [e for e, _, _ in points]
    cover: dict[int, list[int]] = {}
    for i, (_, nodes, local) in enumerate(points):
        for n in nodes:
            if n in local or n in fixed or math.isinf(cost[n]):
                continue
            cover.setdefault(n, []).append(i)

    def relief(n: int) -> int:
        u = shape[n].units
        return sum(min(u, excess[i]) for i in cover[n] if excess[i] > 0)

    heap = []
    for n, pts in cover.items():
        r = relief(n)
        if r:
            heap.append((cost[n] / r, n, r))
    heapq.heapify(heap)
    chosen: list[int] = []
    remaining = sum(1 for e in excess if e > 0)
    while heap and remaining:
        key, n, r = heapq.heappop(heap)
        now = relief(n)
        if now == 0:
            continue
        if now != r:                                  # its points got relieved meanwhile
            heapq.heappush(heap, (cost[n] / now, n, now))
            continue
        chosen.append(n)
        u = shape[n].units
        for i in cover[n]:
            if excess[i] > 0:
                excess[i] -= u
                if excess[i] <= 0:
                    remaining -= 1
    return chosen
