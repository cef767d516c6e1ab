"""Linear-scan register allocation (Poletto and Sarkar, "Linear Scan Register Allocation",
TOPLAS 21(5), 1999), on the register-unit model (SPEC section 2): a third allocator beside
the seeds' two, and a baseline to compare them with (``--allocator linear``).

Each node gets a *live interval*, the smallest range of program points (instruction ids, blocks
in layout order) that holds every point where one of its registers is live, defined or read
(:meth:`~ptxalloc.alloc.api.Problem.intervals`). The intervals are visited by increasing start
(ties to the lower node id); each takes the lowest placement of its shape — pairs, quads and
tuples take aligned consecutive units — that no assigned node it interferes with holds (a
value live across a call tries the callee-saved registers first, SPEC section 7). The
occupancy is the shared :class:`~ptxalloc.alloc.matrix.UnitMatrix`, and a conflict is an
interference on a shared unit, so an interval whose end has passed stops blocking anything by
itself: the paper's *expire* step, made exact by the interference graph (as LLVM's
RegAllocBasic does with its LiveRegMatrix). Every node that blocks a placement of the current
one is therefore still *active* (its interval reaches the current start).

When no placement is free, the paper spills the active interval with the furthest end, or the
current one if that ends further. Here a placement may be blocked by several nodes (a pair
over two scalars): for each placement whose blockers may all be spilled (not precolored, finite
cost) the blockers' earliest end is taken; the placement where it is furthest wins (the lowest
such placement on a tie); if that end lies beyond the current interval's end, the blockers are
spilled and the current node takes the placement, else the current node is spilled. A node
that must not be spilled (a spill temporary) always evicts when it can. Precolored nodes keep
their placement and are never evicted. The nodes left unplaced go back to the driver, which
spills them and runs another round, as for the other allocators; no copy coalescing is asked
for (the paper has none; compaction later still prefers a copy partner's register).
"""

from __future__ import annotations

import math

from ..util import bits
from .api import Allocator, Coloring, Problem, register
from .matrix import UnitMatrix


def color(p: Problem) -> Coloring:
    """One round of linear scan: every node placed or left to spill."""
    result = Coloring()
    matrix = UnitMatrix.for_problem(p)
    result.start = matrix.start
    cost = p.cost
    shape = p.shape
    regfile = p.regfile
    prefer = p.prefer
    intervals = p.intervals()
    nodes = [n for n in p.members if n not in p.precolored]
    end = {n: intervals[n][1] if n in intervals else -1 for n in nodes}
    hard = 0                                  # nodes that are never evicted
    for n in p.precolored:
        hard |= 1 << n
    for n in nodes:
        if math.isinf(cost[n]):
            hard |= 1 << n
    order = sorted(nodes, key=lambda n: (intervals[n][0] if n in intervals else -1, n))
    result.stack = order
    for n in order:
        placements = regfile.placements(shape[n])
        forbidden = matrix.forbidden(n)
        s = matrix.lowest_free_preferring(placements, forbidden, prefer.get(n))
        if s is not None:
            matrix.assign(n, s)
            continue
        best = None                           # (blockers' earliest end, start, blockers)
        for s, _ in placements:
            blockers = matrix.conflicts(n, s)
            if blockers & hard:
                continue
            reach = min(end[m] for m in bits(blockers))
            if best is None or reach > best[0]:
                best = (reach, s, blockers)
        if best is not None and (best[0] > end[n] or hard >> n & 1):
            for m in bits(best[2]):
                matrix.unassign(m)
                result.spilled.append(m)
            matrix.assign(n, best[1])
        else:
            result.spilled.append(n)
    return result


class LinearScan(Allocator):
    """Linear scan as a registry entry."""

    name = "linear"
    description = "linear scan over live intervals (Poletto and Sarkar 1999)"
    coalesces = False

    def color(self, problem: Problem, options) -> Coloring:
        return color(problem)


register(LinearScan())
