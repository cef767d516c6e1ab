"""Second chances for a round's spill choice, where the optimum showed the heuristics' choice
wrong (issues 13 and 18; ``docs/grade-findings.md``). Seed 002's Briggs coloring ("Spill
Selection", "Coalescing Algorithms") spills what select could not place and never looks back;
two things after select lower the cost of that choice in a function's first round (the driver,
:func:`ptxalloc.alloc.driver._second_chances`), each a knob (:mod:`knobs`):

* **eviction** (``SpillEvict``, :func:`evict`): a node that found no placement takes the
  placement whose colored occupants cost less to spill than it does; they move to another free
  placement, or spill instead. Optimistic select never revisits a failure; this does, once per
  failed node, most expensive first.
* **uncoalesced retry** (``SpillUncoalesced``, :func:`cheaper`): conservative coalescing merges
  copies into nodes that, once chosen for spilling, spill whole at the sum of their members'
  costs. When the coalesced coloring spills, the driver colors the uncoalesced problem too and
  keeps whichever spills less (the coalesced one on a tie), the way optimistic coalescing undoes
  a merge whose node must spill.

Both only ever keep a coloring whose spill cost (:func:`spill_cost`, the seeds' cost model) is
lower; the spilled nodes still go through the driver's spill rewrite and the checker.
"""

from __future__ import annotations

from ..util import bits
from .api import Coloring, Problem
from .matrix import UnitMatrix


def spill_cost(p: Problem, spilled) -> float:
    """The seeds' spill cost of leaving ``spilled`` (nodes of ``p``) without a register."""
    return sum(p.cost[n] for n in spilled)


def evict(p: Problem, coloring: Coloring) -> Coloring:
    """The eviction pass over ``coloring`` (module docstring), in place; returns it.

    Each spilled node, most expensive first, looks at every placement its shape allows: the
    colored nodes interfering with it there (never a precolored one) are its occupants. The
    placement with the cheapest occupants is taken when they cost less than the node; each
    occupant then takes the lowest placement still free for it, or spills."""
    if not coloring.spilled:
        return coloring
    matrix = UnitMatrix.for_problem(p, {**p.precolored, **coloring.start})
    precolored = 0
    for m in p.precolored:
        precolored |= 1 << m
    spilled = list(coloring.spilled)
    for n in sorted(coloring.spilled, key=lambda n: (-p.cost[n], n)):
        best = None
        cost_of: dict[int, float] = {}      # occupants (a bitset) -> their cost: placements
        for s, _ in p.regfile.placements(p.shape[n]):      # over one wide value share them
            occupants = matrix.conflicts(n, s)
            if occupants & precolored:
                continue
            c = cost_of.get(occupants)
            if c is None:
                c = cost_of[occupants] = spill_cost(p, bits(occupants))
            if c < p.cost[n] and (best is None or c < best[0]):
                best = (c, s, occupants)
        if best is None:
            continue
        _, s, occupants = best
        occupants = bits(occupants)
        for m in occupants:
            matrix.unassign(m)
        matrix.assign(n, s)
        spilled.remove(n)
        for m in occupants:
            t = matrix.lowest_free(p.regfile.placements(p.shape[m]), matrix.forbidden(m))
            if t is None:
                spilled.append(m)
            else:
                matrix.assign(m, t)
    coloring.start = matrix.start
    coloring.spilled = spilled
    return coloring


def cheaper(first: tuple[Problem, Coloring],
            second: tuple[Problem, Coloring]) -> tuple[Problem, Coloring]:
    """Of two (problem, coloring) answers to the same round, the one that spills less;
    ``first`` on a tie."""
    if spill_cost(second[0], second[1].spilled) < spill_cost(first[0], first[1].spilled):
        return second
    return first
