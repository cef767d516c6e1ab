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
  spill cost over relief, ``cost / (units x points still over the target that it relieves)``;
  the cheapest is taken, the excess of its points drops by its width, the others are re-keyed
  lazily when they come up, until no point is over the target or nothing left relieves one.

The pressure at a point is only a lower bound on what coloring needs (alignment, and graphs that
are not chordal), so a SPILL attempt guided for target T can still fail; the retry loop then asks
again for T - 1.

Representation: the points are numbered block by block, each block walked backward from its
live-out set; within a block a node is live over runs of consecutive points, so its points are a
few *intervals* of point numbers (plus the points where it is local), and the work is linear in
the instructions and the live ranges — not in points x live values, which on the corpus's
unrolled kernels is millions. A Fenwick tree over "still over the target" flags answers how many
of a node's points are still unrelieved.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from ..target.units import GPR
from ..util import bits
from .api import Problem


@dataclass
class ExcessPoints:
    """The points of one register file whose pressure exceeds a floor target."""

    totals: list[int] = field(default_factory=list)                 # units needed per point
    instr: list[int] = field(default_factory=list)                  # its instruction id
    intervals: dict[int, list[tuple[int, int]]] = field(default_factory=dict)   # [a, b)
    local: dict[int, list[int]] = field(default_factory=dict)       # points where n is local

    def __len__(self) -> int:
        return len(self.totals)


def excess_points(p: Problem, file: int, floor_units: int) -> ExcessPoints:
    """Every instruction where the nodes of ``file`` that must coexist exceed
    ``floor_units``, with each node's live intervals over them."""
    prog = p.program
    press = prog.gpr_pressure if file == GPR else prog.pred_pressure
    limit = floor_units / (2 if file == GPR else 1)
    defs_at, uses_at, guarded = prog.defs, prog.uses, prog.guarded
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
                if sh is None or sh.file != file:
                    n = -1
            node_of[v] = n
        return n

    out = ExcessPoints()
    totals = out.totals
    intervals = out.intervals
    local_pts = out.local

    def close(n: int, a: int, b: int) -> None:
        if a >= b:
            return
        runs = intervals.get(n)
        if runs is None:
            intervals[n] = [(a, b)]
        elif runs[-1][1] == a:                      # continues the run of a previous block
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((a, b))
    for first, end, _, live_out in prog.blocks:
        # the walk can stop after the earliest excess point
        lowest = next((k for k in range(end - first) if press[first + k] > limit), None)
        if lowest is None:
            continue
        count: dict[int, int] = {}           # node -> its registers live
        since: dict[int, int] = {}           # node -> first point of its open interval
        live: set[int] = set()               # registers live

        def enter(regs) -> int:
            """Registers becoming live (walking backwards); returns the units their nodes
            add to the total."""
            added = 0
            for v in regs:
                if v in live:
                    continue
                n = node(v)
                if n >= 0:
                    live.add(v)
                    c = count.get(n, 0)
                    count[n] = c + 1
                    if not c:
                        added += shape[n].units
                        since[n] = len(totals)
            return added

        total = enter(bits(live_out))
        for k in range(end - first - 1, lowest - 1, -1):
            defs = defs_at[first + k]
            if press[first + k] > limit:
                extra = 0
                seen = []
                for d in defs:
                    n = node(d)
                    if n >= 0 and n not in count and n not in seen:
                        seen.append(n)
                        extra += shape[n].units
                if total + extra > floor_units:
                    i = len(totals)
                    totals.append(total + extra)
                    out.instr.append(first + k)
                    for v in defs + uses_at[first + k]:
                        n = node(v)
                        if n >= 0 and n in count:
                            got = local_pts.setdefault(n, [])
                            if not got or got[-1] != i:
                                got.append(i)
            if k == lowest:
                break
            if not guarded[first + k]:
                for d in defs:
                    if d not in live:
                        continue
                    live.discard(d)
                    n = node(d)
                    if n >= 0:
                        c = count[n]
                        if c > 1:
                            count[n] = c - 1
                            continue
                        del count[n]
                        total -= shape[n].units
                        close(n, since.pop(n), len(totals))
            total += enter(uses_at[first + k])
        end = len(totals)
        for n, a in since.items():
            close(n, a, end)
    return out


class _Fenwick:
    """Prefix sums of 0/1 flags with point updates."""

    def __init__(self, flags: list[int]):
        n = len(flags)
        tree = [0] + list(flags)
        for i in range(1, n + 1):
            j = i + (i & -i)
            if j <= n:
                tree[j] += tree[i]
        self.tree = tree
        self.n = n

    def add(self, i: int, delta: int) -> None:
        tree = self.tree
        i += 1
        while i <= self.n:
            tree[i] += delta
            i += i & -i

    def prefix(self, i: int) -> int:
        """Sum of flags [0, i)."""
        tree = self.tree
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s


def spill_guidance(p: Problem, file: int, target_units: int,
                   points: ExcessPoints | None = None) -> list[int]:
    """Nodes of ``file`` to spill, cheapest relief first, so that the pressure stays within
    ``target_units`` wherever spilling can bring it there. ``points`` may be computed once
    (with the lowest target of a descent) and reused for every higher target."""
    if points is None:
        points = excess_points(p, file, target_units)
    excess = [t - target_units for t in points.totals]
    if not any(e > 0 for e in excess):
        return []
    cost = p.cost
    shape = p.shape
    precolored = p.precolored
    active = [1 if e > 0 else 0 for e in excess]
    tree = _Fenwick(active)
    remaining = sum(active)
    local = points.local

    def unrelieved(n: int) -> int:
        c = 0
        pre = tree.prefix
        for a, b in points.intervals[n]:
            c += pre(b) - pre(a)
        for i in local.get(n, ()):
            c -= active[i]
        return c

    static = [0]                                     # prefix sums of the initial flags
    acc = 0
    for f in active:
        acc += f
        static.append(acc)
    heap = []
    for n, runs in points.intervals.items():
        if n in precolored or math.isinf(cost[n]):
            continue
        r = 0
        for a, b in runs:
            r += static[b] - static[a]
        for i in local.get(n, ()):
            r -= active[i]
        if r > 0:
            heap.append((cost[n] / (r * shape[n].units), n, r))
    heapq.heapify(heap)
    chosen: list[int] = []
    while heap and remaining:
        _, n, r = heapq.heappop(heap)
        now = unrelieved(n)
        if now <= 0:
            continue
        if now != r:                                  # its points got relieved meanwhile
            heapq.heappush(heap, (cost[n] / (now * shape[n].units), n, now))
            continue
        chosen.append(n)
        u = shape[n].units
        mine = set(local.get(n, ()))
        for a, b in points.intervals[n]:
            for i in range(a, b):
                e = excess[i]
                if e > 0 and i not in mine:
                    e -= u
                    excess[i] = e
                    if e <= 0:
                        active[i] = 0
                        tree.add(i, -1)
                        remaining -= 1
    return chosen
