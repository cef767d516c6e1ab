"""Property test of giving way (issue 13, :func:`ptxalloc.alloc.choice.give_way`): on random
interference graphs of 32- and 64-bit values with random spill costs and access counts,
colored by Briggs (seed 002) and then by eviction, the giving-way pass leaves a valid coloring
(every node placed or spilled, no two interfering nodes on a common unit, every placement one
its shape allows) whose spill cost is never higher — strictly lower when anything changed —
and whose bytes of spill code (:func:`ptxalloc.alloc.choice.spill_code_bytes`) are never
more. End to end, every allocation of the fuzzer (tests/property/test_fuzz_alloc.py) runs
with it on and is proven by the checker."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ptxalloc.alloc import choice
from ptxalloc.alloc.briggs import color
from ptxalloc.alloc.api import Coloring, Problem, Program
from ptxalloc.ir.registers import RegClass
from ptxalloc.target.units import RegFile, vreg_shape


@st.composite
def problems(draw) -> Problem:
    n = draw(st.integers(3, 14))
    wide = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), min_size=n, max_size=4 * n, unique=True))
    costs = draw(st.lists(st.integers(1, 200), min_size=n, max_size=n))
    accesses = draw(st.lists(st.integers(1, 9), min_size=n, max_size=n))
    k = draw(st.integers(2, 5))
    adj = [0] * n
    for a, b in edges:
        adj[a] |= 1 << b
        adj[b] |= 1 << a
    classes = [RegClass.GPR64 if w else RegClass.GPR32 for w in wide]
    uses = [[v] for v in range(n) for _ in range(accesses[v])]
    program = Program([[] for _ in uses], uses, [False] * len(uses), [], [], [], [])
    return Problem(RegFile(k), [vreg_shape(c, 1) for c in classes], adj,
                   [float(c) for c in costs], [8 if w else 4 for w in wide], [], [], program)


def _assert_valid(p: Problem, coloring: Coloring) -> None:
    placed = {n: s for n, s in coloring.start.items() if n not in p.precolored}
    assert set(placed) | set(coloring.spilled) == set(p.members)
    assert not set(placed) & set(coloring.spilled)
    assert len(set(coloring.spilled)) == len(coloring.spilled)
    for n, s in placed.items():
        assert s in dict(p.regfile.placements(p.shape[n]))
        for m, t in placed.items():
            if m != n and p.adj[n] >> m & 1:
                assert not p.shape[n].mask(s) & p.shape[m].mask(t), (n, m)


def _bytes(p: Problem, spilled) -> float:
    size = choice.spill_code_bytes(p)
    return sum(size[n] for n in spilled)


@settings(max_examples=300, deadline=None)
@given(problems())
def test_giving_way_never_costs_more_in_cycles_or_bytes(p):
    coloring = choice.evict(p, color(p))
    _assert_valid(p, coloring)
    before = (choice.spill_cost(p, coloring.spilled), _bytes(p, coloring.spilled))
    was = (dict(coloring.start), sorted(coloring.spilled))
    after = choice.give_way(p, coloring)
    _assert_valid(p, after)
    cost, size = choice.spill_cost(p, after.spilled), _bytes(p, after.spilled)
    assert size <= before[1]
    assert cost <= before[0]
    if sorted(after.spilled) != was[1]:
        assert cost < before[0]


@settings(max_examples=300, deadline=None)
@given(problems(), st.data())
def test_rematerialized_nodes_count_no_bytes_and_bytes_never_rise(p, data):
    """With some nodes rematerializable (their spill code is recomputation, no bytes), giving
    way still never raises the cost or the bytes counted that way, and never spills a node in
    exchange for seating only rematerializable ones (that trade saves no bytes)."""
    recomputed = set(data.draw(st.lists(st.sampled_from(sorted(p.members)), unique=True)))
    coloring = choice.evict(p, color(p))
    size = choice.spill_code_bytes(p, recomputed=recomputed)
    assert all(size[n] == 0 for n in recomputed)
    before = (choice.spill_cost(p, coloring.spilled), sum(size[n] for n in coloring.spilled))
    was = set(coloring.spilled)
    after = choice.give_way(p, coloring, recomputed)
    _assert_valid(p, after)
    assert sum(size[n] for n in after.spilled) <= before[1]
    assert choice.spill_cost(p, after.spilled) <= before[0]
    newly_spilled = set(after.spilled) - was
    seated = was - set(after.spilled)
    if any(size[n] > 0 for n in newly_spilled):
        assert any(size[n] > 0 for n in seated)


def _evict_by_definition(p: Problem, coloring: Coloring) -> Coloring:
    """The eviction pass as its docstring states it, summing the costs of every set of
    occupants (:func:`choice.evict` rules most of them out by their costliest member)."""
    from ptxalloc.alloc.matrix import UnitMatrix
    if not coloring.spilled:
        return coloring
    matrix = UnitMatrix.for_problem(p, {**p.precolored, **coloring.start})
    spilled = list(coloring.spilled)
    for n in sorted(coloring.spilled, key=lambda n: (-p.cost[n], n)):
        best = None
        for s, _ in p.regfile.placements(p.shape[n]):
            occupants = matrix.conflicts(n, s)
            if any(occupants >> m & 1 for m in p.precolored):
                continue
            c = choice.spill_cost(p, [m for m in range(p.nregs) if occupants >> m & 1])
            if c < p.cost[n] and (best is None or c < best[0]):
                best = (c, s, occupants)
        if best is None:
            continue
        _, s, occupants = best
        occupants = [m for m in range(p.nregs) if occupants >> m & 1]
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
    return Coloring(start=matrix.start, spilled=spilled)


COSTS = st.sampled_from([0.0, 0.1, 0.2, 0.30000000000000004, 1.0, 3.0, 7.5, 100.0,
                         float("inf")])


@settings(max_examples=300, deadline=None)
@given(problems(), st.data())
def test_eviction_takes_the_placements_the_plain_sums_take(p, data):
    """Eviction (issue 16: occupants ruled out by their costliest member, one occupant's cost
    read directly) places and spills exactly what summing every set of occupants does, with
    costs that tie, that are zero, infinite, or sum inexactly in floating point."""
    p.cost = [data.draw(COSTS) for _ in range(p.nregs)]
    first = color(p)
    want = _evict_by_definition(p, Coloring(start=dict(first.start), spilled=list(first.spilled)))
    got = choice.evict(p, first)
    assert (got.start, got.spilled) == (want.start, want.spilled)


@settings(max_examples=200, deadline=None)
@given(st.lists(COSTS, min_size=1, max_size=300), COSTS)
def test_costlier_nodes_are_those_costing_at_least_the_bound(costs, bound):
    """``_Costlier.at_least``: the bitset of the nodes whose cost is at least the bound, across
    its 64-node steps."""
    n = len(costs)
    program = Program([], [], [], [], [], [], [])
    from ptxalloc.target.units import GPR32
    p = Problem(RegFile(8), [GPR32] * n, [0] * n, costs, [4] * n, [], [], program)
    want = sum(1 << v for v in range(n) if costs[v] >= bound)
    assert choice._Costlier(p).at_least(bound) == want
