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


def excess_points(p: Problem, file: int, target_units: int,
                  excluded: set[int] | frozenset[int] = frozenset()):
    """The points over the target: a list of (excess units, live nodes, nodes the instruction
    itself reads or writes). Each block that has one is walked backward from its live-out
    set, keeping a count per live node (several registers make one node)."""
    an = p.analysis
    cfg = an.cfg
    press = an.pressure.gpr if file == GPR else an.pressure.pred
    limit = target_units / (2 if file == GPR else 1)
    live_out = an.liveness.live_out
    find = p.find
    shape = p.shape
    pinned = p.pinned
    node_of: dict[int, int] = {}

    def node(v: int) -> int:
        n = node_of.get(v)
        if n is None:
            n = -1
            if v not in pinned:
                n = find(v)
                sh = shape[n]
                if sh is None or sh.file != file or n in excluded:
                    n = -1
            node_of[v] = n
        return n

    points = []
    for b in cfg.blocks:
        first = b.first
        instrs = b.instrs
        if not any(press[first + k] > limit for k in range(len(instrs))):
            continue
        count: dict[int, int] = {}
        total = 0
        for v in bits(live_out[b.id]):
            n = node(v)
            if n >= 0:
                c = count.get(n, 0)
                count[n] = c + 1
                if not c:
                    total += shape[n].units
        for k in range(len(instrs) - 1, -1, -1):
            ins = instrs[k]
            extra = 0
            new = []
            for d in ins.defs:
                n = node(d)
                if n >= 0 and n not in count and n not in new:
                    new.append(n)
                    extra += shape[n].units
            if press[first + k] > limit and total + extra > target_units:
                local = {node(v) for v in ins.defs + ins.uses}
                points.append((total + extra - target_units, list(count) + new, local))
            if ins.guard < 0:
                for d in ins.defs:
                    n = node(d)
                    if n >= 0 and n in count:
                        c = count[n] - 1
                        if c:
                            count[n] = c
                        else:
                            del count[n]
                            total -= shape[n].units
            for u in ins.uses:
                n = node(u)
                if n >= 0:
                    c = count.get(n, 0)
                    count[n] = c + 1
                    if not c:
                        total += shape[n].units
    return points


def spill_guidance(p: Problem, file: int, target_units: int,
                   excluded: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Nodes of ``file`` to spill, cheapest relief first, so that the pressure of the nodes not
    in ``excluded`` stays within ``target_units`` wherever spilling can bring it there."""
    points = excess_points(p, file, target_units, excluded)
    if not points:
        return []
    cost = p.cost
    shape = p.shape
    fixed = p.fixed
    excess = [e for e, _, _ in points]
    cover: dict[int, list[int]] = {}
    members: list[list[int]] = []                 # per point: the nodes that relieve it
    for i, (_, nodes, local) in enumerate(points):
        mine = []
        for n in nodes:
            if n in local or n in fixed or math.isinf(cost[n]):
                continue
            mine.append(n)
            got = cover.get(n)
            if got is None:
                cover[n] = [i]
            else:
                got.append(i)
        members.append(mine)
    units = {n: shape[n].units for n in cover}
    widest = max(units.values(), default=0)
    rel = {n: sum(min(units[n], excess[i]) for i in pts) for n, pts in cover.items()}
    heap = [(cost[n] / r, n, r) for n, r in rel.items() if r]
    heapq.heapify(heap)
    chosen: list[int] = []
    done: set[int] = set()
    remaining = sum(1 for e in excess if e > 0)
    while heap and remaining:
        _, n, r = heapq.heappop(heap)
        if n in done:
            continue
        now = rel[n]
        if now <= 0:
            continue
        if now != r:                                  # its points got relieved meanwhile
            heapq.heappush(heap, (cost[n] / now, n, now))
            continue
        chosen.append(n)
        done.add(n)
        u = units[n]
        for i in cover[n]:
            e = excess[i]
            if e <= 0:
                continue
            e2 = e - u
            excess[i] = e2
            if e2 <= 0:
                remaining -= 1
            if e2 >= widest:
                continue                  # still over by more than any node relieves
            if e2 < 0:
                e2 = 0
            for m in members[i]:
                um = units[m]
                if um > e2:
                    rel[m] -= (um if um < e else e) - e2
    return chosen
