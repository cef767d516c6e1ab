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

A third runs after select in **every** round (the driver; knob ``SpillEvictGroup``):

* **giving way** (:func:`give_way`): eviction works one failed node at a time and takes a
  placement only when its occupants cost less than that one node. A wide or long-lived colored
  node (a 128-bit vector live across a loop, a 64-bit address) can block many failed nodes at
  once: each costs less than it, together they cost more. Here a colored node gives way when
  the failed nodes its registers would seat (most expensive first, each on the lowest
  placement then free) are worth more than it — in the seeds' cost, and in bytes of spill code
  (:func:`spill_code_bytes`: a 64-bit value spills 8 bytes per access, a rematerializable one
  none) — and it moves to a placement still free, or spills instead. It judges one round;
  the rounds after it can spill more, so at the knob's 2 (the default) the driver allocates a
  function of at most 1,000 instructions where it changed a choice without it too and keeps
  the fewer spill bytes (:func:`ptxalloc.alloc.driver.allocate_function`).

All three only ever keep a coloring whose spill cost (:func:`spill_cost`, the seeds' cost model)
is lower; the spilled nodes still go through the driver's spill rewrite and the checker.
"""

from __future__ import annotations

import math
from bisect import bisect_right

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
    cost, occ = p.cost, matrix.occ
    costlier = _Costlier(p)
    for n in sorted(coloring.spilled, key=lambda n: (-cost[n], n)):
        best = None
        limit = cost[n]
        # a placement is taken only when its occupants cost less than ``bound`` (the node's
        # cost, then the best placement's): one occupant in ``above`` costs that already
        bound = limit
        above = costlier.at_least(bound)
        near = p.adj[n]
        width = p.shape[n].units
        cost_of: dict[int, float] = {}      # occupants (a bitset) -> their cost: placements
        for s, _ in p.regfile.placements(p.shape[n]):      # over one wide value share them
            occupants = 0                   # matrix.conflicts(n, s), inline
            for u in range(s, s + width):
                occupants |= occ[u]
            occupants &= near
            if occupants & precolored:
                continue
            c = cost_of.get(occupants)
            if c is None:
                if not occupants & (occupants - 1):     # one occupant (or none): its cost
                    c = cost[occupants.bit_length() - 1] if occupants else 0
                elif occupants & above:
                    # at least the bound (costs are never negative): not taken, now or
                    # for a lower bound later
                    c = bound
                else:
                    c = spill_cost(p, bits(occupants))
                cost_of[occupants] = c
            if c < limit and (best is None or c < best[0]):
                best = (c, s, occupants)
                bound = c
                above = costlier.at_least(bound)
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


class _Costlier:
    """The nodes of a problem by spill cost, most expensive first, to answer "which nodes cost
    at least this much" as a bitset (:meth:`at_least`): the eviction pass rules out a set of
    occupants with one AND instead of summing the costs of its members. Bitsets of the first
    64, 128, ... nodes are kept; a query ORs at most 63 more nodes to one of them."""

    STEP = 64

    def __init__(self, p: Problem):
        cost = p.cost
        self.order = sorted(p.members, key=lambda n: -cost[n])
        self.negated = [-cost[n] for n in self.order]       # ascending, for bisect
        self.prefix = [0]               # prefix[i]: the first STEP x i nodes of ``order``
        mask = 0
        for i, n in enumerate(self.order, 1):
            mask |= 1 << n
            if i % self.STEP == 0:
                self.prefix.append(mask)

    def at_least(self, bound: float) -> int:
        """The bitset of the nodes whose cost is at least ``bound``."""
        count = bisect_right(self.negated, -bound)
        whole = count // self.STEP
        mask = self.prefix[whole]
        for n in self.order[whole * self.STEP:count]:
            mask |= 1 << n
        return mask


def cheaper(first: tuple[Problem, Coloring],
            second: tuple[Problem, Coloring]) -> tuple[Problem, Coloring]:
    """Of two (problem, coloring) answers to the same round, the one that spills less;
    ``first`` on a tie."""
    if spill_cost(second[0], second[1].spilled) < spill_cost(first[0], first[1].spilled):
        return second
    return first


def spill_code_bytes(p: Problem, file: int | None = None,
                     recomputed=frozenset(), homed=frozenset()) -> dict[int, float]:
    """Per node (of ``file``, or of every file): the bytes of spill code spilling it would add
    — a store per definition and a reload per use, each its register's width (what ``ptxas -v``
    reports as spill stores and loads); infinite for a node that may not be spilled. A member
    of ``recomputed`` (rematerializable: recomputed at each use, :mod:`ptxalloc.spill.remat`)
    adds none, and one of ``homed`` (a run temporary of live-range splitting, whose spill
    reloads from its value's slot, the store after each definition already there) a reload
    per use only."""
    prog = p.program
    count = [0] * p.nregs
    for defs in prog.defs:
        for v in defs:
            if v not in homed:
                count[v] += 1
    for uses in prog.uses:
        for v in uses:
            count[v] += 1
    for v in recomputed:
        count[v] = 0
    reg_bytes = p.reg_bytes
    out: dict[int, float] = {}
    for n, members in p.members.items():
        if file is not None and p.shape[n].file != file:
            continue
        if math.isinf(p.cost[n]) or n in p.precolored:
            out[n] = math.inf
        else:
            out[n] = float(sum(count[v] * reg_bytes[v] for v in members))
    return out


def give_way(p: Problem, coloring: Coloring, recomputed=frozenset(),
             homed=frozenset()) -> Coloring:
    """The giving-way pass over ``coloring`` (module docstring), in place; returns it.

    A step: a colored node that interferes with a failed one (never a precolored or
    unspillable one) is taken off its units; the failed nodes interfering with it, most
    expensive first, each take the lowest placement free of their colored neighbours and of
    the ones seated before them; then it takes the lowest placement still free for it, or
    spills. A step is taken only when it lowers the spill cost and, when it spills the node,
    the seated nodes need at least as many bytes of spill code (:func:`spill_code_bytes`, with
    ``recomputed`` and ``homed``: a rematerializable register's spill code is recomputation,
    no bytes, and a run temporary's stores are already there). A failed node next to it that
    finds a placement free afterwards takes it.

    The steps go in sweeps: every candidate's step is computed, then they are taken best
    first, each computed again when its turn comes (an earlier one may have changed its
    neighbourhood) and taken if it still lowers the cost; the first always is, so every sweep
    lowers the cost and the pass ends, when a sweep finds no step. Computing every candidate
    again after each step, a strict best-first search, cost 3,771 seatings per round on
    Triton's attention backward at K = 255 (315 nodes left out) against 705, for the same
    spill bytes on the 60-file sample but for MCX's main loop at K = 24 (928 against 956)."""
    if not coloring.spilled:
        return coloring
    matrix = UnitMatrix.for_problem(p, {**p.precolored, **coloring.start})
    held, adj, cost, shape = matrix.held, p.adj, p.cost, p.shape
    size = spill_code_bytes(p, None, recomputed, homed)
    failed = set(coloring.spilled)
    failed_mask = 0
    for q in failed:
        failed_mask |= 1 << q
    occ = matrix.occ                # per unit, the nodes colored over it
    taken: dict[int, int] = {}      # failed node -> the units its colored neighbours hold
    alone: dict[int, int] = {}      # ... and of those, the units one neighbour alone holds
    hope_at = [0] * len(occ)        # per unit, the failed nodes one neighbour alone blocks

    def mark(q: int, where) -> None:
        """Bring ``taken``, ``alone`` and ``hope_at`` of failed node ``q`` up to the colored
        neighbours it has at the units ``where`` (counted in the matrix)."""
        near, bit = adj[q], 1 << q
        t, a = taken[q], alone[q]
        for u in where:
            ub = 1 << u
            c = (occ[u] & near).bit_count()
            t = t | ub if c else t & ~ub
            if c == 1:
                a |= ub
                hope_at[u] |= bit
            else:
                a &= ~ub
                hope_at[u] &= ~bit
        taken[q], alone[q] = t, a

    def survey(q: int) -> None:
        """Find failed node ``q``'s units held by colored neighbours, and those one of them
        alone holds, afresh (``q`` is marked nowhere in ``hope_at``: it was colored, or is
        new)."""
        nonlocal failed_mask
        failed.add(q)
        failed_mask |= 1 << q
        once = twice = 0            # units held by at least one colored neighbour, by two
        for units in map(held.__getitem__, bits(adj[q] & matrix.assigned)):
            twice |= once & units
            once |= units
        taken[q] = once
        alone[q] = only = once & ~twice
        bit = 1 << q
        for u in bits(only):
            hope_at[u] |= bit

    def forget(q: int) -> None:
        """Failed node ``q`` found a placement."""
        nonlocal failed_mask
        failed.discard(q)
        failed_mask &= ~(1 << q)
        for u in bits(alone.pop(q)):
            hope_at[u] &= ~(1 << q)
        del taken[q]

    def place(x: int, s: int) -> None:
        matrix.assign(x, s)
        where = range(s, s + shape[x].units)
        for q in bits(adj[x] & failed_mask):
            mark(q, where)

    def lift(x: int) -> None:
        s = matrix.unassign(x)
        where = range(s, s + shape[x].units)
        for q in bits(adj[x] & failed_mask):
            mark(q, where)

    def hopeful(m: int) -> int:
        """The failed neighbours of ``m`` that ``m`` alone blocks on some unit: only they can
        gain a placement when it gives way."""
        found = 0
        first = matrix.start[m]
        for u in range(first, first + shape[m].units):
            found |= hope_at[u]
        return found & adj[m]

    def step(m: int, near: int):
        """What ``m`` giving way would do, seating failed nodes of ``near`` (its hopeful
        neighbours): (gain, seated, where m moves or None), or None when it lowers no cost or
        would raise the bytes of spill code."""
        seated, worth = _seat(p, m, held[m], near, taken, alone)
        if worth <= 0:
            return None
        blocked = matrix.forbidden(m)
        for q, s in seated:
            blocked |= shape[q].mask(s)
        moved = _lowest(p, m, blocked)
        if moved is None:
            if sum(size[q] for q, _ in seated) < size[m]:
                return None
            worth -= cost[m]
        return (worth, seated, moved) if worth > 0 else None

    colored, precolored = matrix.start, p.precolored

    def eligible(m: int) -> bool:
        return m in colored and m not in precolored and not math.isinf(cost[m])

    for q in list(failed):
        survey(q)
    while failed:
        near = 0
        for q in failed:
            near |= adj[q]
        ranked = []
        for m in bits(near):
            if eligible(m):
                h = hopeful(m)
                got = step(m, h) if h else None
                if got is not None:
                    ranked.append((-got[0], m))
        if not ranked:
            break
        # the steps best first, each computed again when its turn comes (earlier ones may
        # have changed its neighbourhood) and taken if it still lowers the cost
        ranked.sort()
        for _, m in ranked:
            h = hopeful(m) if eligible(m) else 0
            got = step(m, h) if h else None
            if got is None:
                continue
            _, seated, moved = got
            lift(m)
            for q, s in seated:
                forget(q)
                place(q, s)
            if moved is not None:
                place(m, moved)
            else:
                survey(m)
            # a failed node that the units ``m`` left may now take a placement outright
            for q in sorted(bits(adj[m] & failed_mask), key=lambda q: (-cost[q], q)):
                s = _lowest(p, q, taken[q])
                if s is not None:
                    forget(q)
                    place(q, s)
    coloring.start = matrix.start
    coloring.spilled = [n for n in coloring.spilled if n in failed] + sorted(
        failed - set(coloring.spilled))
    return coloring


def _seat(p: Problem, m: int, units: int, hopeful: int, taken: dict[int, int],
          alone: dict[int, int]) -> tuple[list[tuple[int, int]], float]:
    """The failed nodes of the bitset ``hopeful`` (neighbours of ``m`` that it alone blocks
    on some unit) that the ``units`` of colored node ``m`` would seat, most expensive first,
    each on the lowest placement free once ``m`` is gone; and their total cost."""
    seated: list[tuple[int, int]] = []
    worth = 0.0
    cost, adj, shape = p.cost, p.adj, p.shape
    seated_bits = 0                 # the seated nodes, and the units each takes
    seated_units: dict[int, int] = {}
    free_starts = p.regfile.free_starts
    for q in sorted(bits(hopeful), key=lambda q: (-cost[q], q)):
        blocked = taken[q] & ~(units & alone[q])
        near = adj[q] & seated_bits             # seated neighbours: a few, peeled off
        while near:
            low = near & -near
            blocked |= seated_units[low.bit_length() - 1]
            near ^= low
        free = free_starts(shape[q], blocked)       # _lowest, inline
        if free:
            s = (free & -free).bit_length() - 1
            seated.append((q, s))
            seated_bits |= 1 << q
            seated_units[q] = shape[q].mask(s)
            worth += cost[q]
    return seated, worth


def _lowest(p: Problem, n: int, blocked: int) -> int | None:
    """The lowest placement of node ``n`` that takes none of the ``blocked`` units."""
    free = p.regfile.free_starts(p.shape[n], blocked)
    return (free & -free).bit_length() - 1 if free else None
