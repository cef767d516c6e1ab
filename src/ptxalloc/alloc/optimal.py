"""The exact allocator: the minimum spill cost of one round's :class:`~ptxalloc.alloc.api.Problem`
and a valid assignment under the register-unit model (SPEC section 2; the cost model of seed 000
"Spill Cost", the one the heuristics minimize), as an integer program (Appel and George,
"Optimal spilling for CISC machines with few registers", PLDI 2001) solved by OR-Tools CP-SAT
(``--allocator optimal``; the choice of solver is measured in docs/decisions.md).

The formulation, per round:

* every node ``n`` either spills (``y[n]``, cost ``cost[n]``) or takes exactly one of its legal
  placements (``x[n, s]``: ``RegFile.placements`` of its shape — pairs, quads and tuples
  aligned, reserved units excluded — less those that overlap a precolored neighbour's units):
  ``sum_s x[n, s] + y[n] = 1``;
* placements of interfering nodes share no unit: for every clique ``C`` of an edge clique cover
  of the interference graph and every unit ``u``, at most one ``x[n, s]`` with ``n`` in ``C``
  and ``u`` in the placement;
* a node that must not be spilled (infinite cost: a spill temporary, a convention register)
  gets a spill cost above every finite total, so the model is always feasible and the driver's
  relief handles such a node as it does for every allocator.

Before solving, nodes whose weighted degree is below their number of placements are removed
one after another (Briggs's *simplify*, exact here: such a node finds a free placement whatever
its neighbours take, so it never spills in an optimum) and placed afterwards in reverse order;
on the budgets where nothing need spill, nothing is left to solve. The cheaper of Briggs's and
linear scan's colorings of the same (uncoalesced) problem is the solver's first incumbent (a
hint), and is kept when the solver stops at the time limit with nothing cheaper: a time limit
always leaves an allocation at least as good as both.

Costs are floats; the solver gets them scaled to integers (a power of two chosen so the total
stays exact within 2**53). The result carries ``optimal`` (the solver proved the minimum),
``cost`` and ``lower_bound`` (the solver's proven bound, in the cost model's units). A node the
optimum spills goes through the driver's spill rewrite like any other allocator's, and the next
round's problem (its spill temporaries) is solved again; the ``optimal``/``lower_bound`` of the
report are those of the first round, the one ``grade`` compares allocators on.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ..errors import UsageError
from ..target.units import blocking_weight
from ..util import bits
from .api import Allocator, Coloring, Problem, register
from .matrix import UnitMatrix
from .session import Session

#: the default time limit per function, in seconds (``--time-limit``)
DEFAULT_TIME_LIMIT = 10.0
#: each later round gets at least this share of the limit, however long the first one took
LATER_ROUND_SHARE = 0.25


@dataclass
class Formulation:
    """The integer program of one problem's core, in plain lists: variable ``i`` is node
    ``var_node[i]`` at start unit ``var_start[i]``; ``spill_cost[j]`` is the scaled cost of
    spilling ``nodes[j]`` (``node_vars[j]`` its placement variables); each list of
    ``at_most_one`` holds variables that may not all be chosen (at most one of them)."""

    nodes: list[int]
    node_vars: list[list[int]]
    spill_cost: list[int]
    var_node: list[int]
    var_start: list[int]
    at_most_one: list[list[int]]
    scale: float
    removed: list[int] = field(default_factory=list)     # simplified nodes, in removal order


@dataclass
class Solution:
    """A solver's answer: per core node the chosen start (None: spilled), whether it is proven
    optimal, and the proven lower bound on the scaled objective."""

    start: dict[int, int | None]
    optimal: bool
    bound: float
    seconds: float


def simplify(p: Problem) -> tuple[list[int], list[int]]:
    """Remove, one after another, the nodes whose weighted degree among the nodes left is below
    their number of placements (never a precolored node). Returns (core nodes, removed nodes in
    removal order)."""
    shape = p.shape
    left = {n for n in p.members if n not in p.precolored}
    fixed = {n: shape[n].mask(s) for n, s in p.precolored.items() if n in p.members}
    wdeg = {}
    for n in left:
        sh = shape[n]
        total = 0
        for m in bits(p.adj[n]):
            if m in fixed:      # exact: the placements its fixed units overlap
                total += sum(1 for _, mask in p.regfile.placements(sh) if mask & fixed[m]) \
                    if shape[m].file == sh.file else 0
            else:
                total += blocking_weight(sh, shape[m])
        wdeg[n] = total
    work = [n for n in sorted(left) if wdeg[n] < p.placements[n]]
    removed: list[int] = []
    gone = set()
    while work:
        n = work.pop()
        if n in gone:
            continue
        gone.add(n)
        removed.append(n)
        sh = shape[n]
        for m in bits(p.adj[n]):
            if m in left and m not in gone:
                before = wdeg[m] < p.placements[m]
                wdeg[m] -= blocking_weight(shape[m], sh)
                if not before and wdeg[m] < p.placements[m]:
                    work.append(m)
    core = sorted(left - gone)
    return core, removed


def _clique_cover(nodes: list[int], adj: dict[int, int]) -> list[list[int]]:
    """An edge clique cover of the subgraph on ``nodes`` (greedy: each uncovered edge starts a
    clique grown by common neighbours, those with uncovered edges to it first). Nodes without
    an edge in the subgraph get no clique."""
    inside = 0
    for n in nodes:
        inside |= 1 << n
    nbr = {n: adj[n] & inside for n in nodes}
    uncovered = dict(nbr)
    cliques: list[list[int]] = []
    for n in sorted(nodes, key=lambda n: -nbr[n].bit_count()):
        while uncovered[n]:
            m = (uncovered[n] & -uncovered[n]).bit_length() - 1
            clique = [n, m]
            common = nbr[n] & nbr[m]
            while common:
                # the candidate with the most uncovered edges into the clique
                best, best_new = -1, -1
                for c in bits(common):
                    new = sum(1 for q in clique if uncovered[c] >> q & 1)
                    if new > best_new:
                        best, best_new = c, new
                clique.append(best)
                common &= nbr[best]
            for a in clique:
                for b in clique:
                    if a != b:
                        uncovered[a] &= ~(1 << b)
            cliques.append(clique)
    return cliques


def formulate(p: Problem) -> Formulation:
    """The integer program of ``p`` after :func:`simplify`."""
    core, removed = simplify(p)
    shape = p.shape
    # units held by precolored nodes, per neighbour: placements overlapping them are illegal
    fixed_mask = {n: shape[n].mask(s) for n, s in p.precolored.items() if n in p.members}
    finite = [p.cost[n] for n in core if not math.isinf(p.cost[n])]
    total = sum(finite) or 1.0
    # a power of two: the scaled total stays below 2**53, so sums are exact
    scale = 2.0 ** max(0, min(40, math.floor(math.log2(2 ** 52 / (total * 2)))))
    scaled = {n: max(0, round(p.cost[n] * scale)) for n in core
              if not math.isinf(p.cost[n])}
    big = sum(scaled.values()) + 1
    var_node: list[int] = []
    var_start: list[int] = []
    node_vars: list[list[int]] = []
    cover: dict[int, dict[int, list[int]]] = {}     # node -> unit -> its variables over it
    for n in core:
        blocked = 0
        for m in bits(p.adj[n]):
            if m in fixed_mask and shape[m].file == shape[n].file:
                blocked |= fixed_mask[m]
        mine = []
        per_unit: dict[int, list[int]] = {}
        for s, mask in p.regfile.placements(shape[n]):
            if mask & blocked:
                continue
            i = len(var_node)
            var_node.append(n)
            var_start.append(s)
            mine.append(i)
            for u in range(s, s + shape[n].units):
                per_unit.setdefault(u, []).append(i)
        node_vars.append(mine)
        cover[n] = per_unit
    at_most_one: list[list[int]] = []
    for clique in _clique_cover(core, p.adj):
        units = set()
        for n in clique:
            units.update(cover[n])
        for u in sorted(units):
            group = [i for n in clique for i in cover[n].get(u, ())]
            if len(group) > 1:
                at_most_one.append(group)
    costs = [scaled.get(n, big) for n in core]
    return Formulation(core, node_vars, costs, var_node, var_start, at_most_one, scale,
                       removed)


def require_solver():
    """OR-Tools' CP-SAT module; a one-line UsageError naming the extra when it is absent."""
    try:
        from ortools.sat.python import cp_model
    except ImportError:
        raise UsageError("the optimal allocator needs OR-Tools: pip install "
                         "'ptxalloc[optimal]' (or: pip install ortools)") from None
    return cp_model


def solve_cpsat(f: Formulation, time_limit: float, hint: dict[int, int | None] | None = None,
                workers: int = 1) -> Solution:
    """Solve ``f`` with OR-Tools CP-SAT within ``time_limit`` seconds; ``hint`` (node -> start
    or None for spilled) is the first incumbent."""
    cp_model = require_solver()
    t0 = time.perf_counter()
    model = cp_model.CpModel()
    x = [model.NewBoolVar("") for _ in f.var_node]
    y = []
    for j, n in enumerate(f.nodes):
        spill = model.NewBoolVar("")
        y.append(spill)
        model.AddExactlyOne([x[i] for i in f.node_vars[j]] + [spill])
    for group in f.at_most_one:
        model.AddAtMostOne([x[i] for i in group])
    model.Minimize(sum(c * v for c, v in zip(f.spill_cost, y) if c))
    if hint is not None:
        for j, n in enumerate(f.nodes):
            want = hint.get(n)
            model.AddHint(y[j], want is None)
            for i in f.node_vars[j]:
                model.AddHint(x[i], f.var_start[i] == want)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit)
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    status = solver.Solve(model)
    seconds = time.perf_counter() - t0
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # no solution within the limit (the hint not even completed): everything spills
        return Solution({n: None for n in f.nodes}, False, solver.BestObjectiveBound(), seconds)
    start: dict[int, int | None] = {n: None for n in f.nodes}
    for i, v in enumerate(x):
        if solver.BooleanValue(v):
            start[f.var_node[i]] = f.var_start[i]
    return Solution(start, status == cp_model.OPTIMAL, solver.BestObjectiveBound(), seconds)


def _scaled_cost(f: Formulation, start: dict[int, int | None]) -> int:
    return sum(c for n, c in zip(f.nodes, f.spill_cost) if start[n] is None)


@dataclass
class Outcome:
    """One round's optimum: the coloring, and what was proven about it."""

    coloring: Coloring
    cost: float                 # the cost model's total of the spilled nodes
    lower_bound: float          # proven: no assignment spills less
    optimal: bool
    seconds: float
    core: int                   # nodes left to the solver after simplify
    variables: int


def _solve_from(p: Problem, f: Formulation, hint: dict, left: float) -> Solution:
    """The solver's answer from a heuristic's ``hint``: zero spill cost needs no solver; a
    solver stopped with nothing cheaper than the hint keeps the hint."""
    if sum(p.cost[n] for n in f.nodes if hint[n] is None) == 0:
        return Solution(hint, True, 0.0, 0.0)
    sol = solve_cpsat(f, left, hint)
    if not sol.optimal and _scaled_cost(f, hint) < _scaled_cost(f, sol.start):
        sol.start = hint
    return sol


def solve(p: Problem, time_limit: float = DEFAULT_TIME_LIMIT) -> Outcome:
    """The minimum-spill-cost coloring of ``p`` (or the best found within ``time_limit``)."""
    from .briggs import color as briggs_color
    from .linear import color as linear_color

    t0 = time.perf_counter()
    f = formulate(p)
    if not f.nodes:                     # simplify placed everything: nothing left to solve
        sol = Solution({}, True, 0.0, 0.0)
    else:
        hint = min(({n: c.start.get(n) for n in f.nodes}
                    for c in (briggs_color(p), linear_color(p))),
                   key=lambda start: _scaled_cost(f, start))
        sol = _solve_from(p, f, hint, time_limit - (time.perf_counter() - t0))
    matrix = UnitMatrix.for_problem(p)
    spilled = []
    for n in f.nodes:
        s = sol.start[n]
        if s is None:
            spilled.append(n)
        else:
            matrix.assign(n, s)
    for n in reversed(f.removed):        # simplify's guarantee: a free placement exists
        placements = p.regfile.placements(p.shape[n])
        s = matrix.lowest_free_preferring(placements, matrix.forbidden(n), p.prefer.get(n))
        assert s is not None, "simplify removed a node without a free placement"
        matrix.assign(n, s)
    cost = sum(p.cost[n] for n in spilled)
    if sol.optimal:
        bound = cost
    else:
        bound = min(cost, max(0.0, sol.bound / f.scale))
    coloring = Coloring(start=matrix.start, spilled=spilled, stack=f.nodes + f.removed[::-1])
    return Outcome(coloring, cost, bound, sol.optimal, time.perf_counter() - t0, len(f.nodes),
                   len(f.var_node))


def gap_percent(cost: float, bound: float) -> float | None:
    """How far ``cost`` lies above ``bound``, in percent of the bound (0 when both are 0;
    None, an unbounded gap, when only the bound is 0)."""
    if math.isinf(cost):
        return None
    if cost <= bound * (1 + 1e-9) + 1e-12:
        return 0.0
    if bound <= 0:
        return None
    return 100.0 * (cost - bound) / bound


class OptimalSession(Session):
    """One function: the time limit is shared by its rounds (each later round gets at least
    :data:`LATER_ROUND_SHARE` of it); the first round's outcome goes into the report."""

    def __init__(self, fn, budget: int, options) -> None:
        super().__init__(fn, budget, options)
        require_solver()            # before any work: a missing solver is not a refusal
        limit = getattr(options, "time_limit", None)
        self.limit = DEFAULT_TIME_LIMIT if limit is None else float(limit)
        self.used = 0.0
        self.first: Outcome | None = None
        self.all_optimal = True

    def color(self, problem: Problem, options) -> Coloring:
        left = max(self.limit - self.used, self.limit * LATER_ROUND_SHARE)
        outcome = solve(problem, left)
        self.used += outcome.seconds
        if self.first is None:
            self.first = outcome
        self.all_optimal &= outcome.optimal
        return outcome.coloring

    def finish(self, result) -> None:
        o = self.first
        if o is None:
            return
        result.extra["optimal"] = o.optimal
        result.extra["spill_cost"] = o.cost
        result.extra["lower_bound"] = o.lower_bound
        result.extra["gap"] = gap_percent(o.cost, o.lower_bound)
        result.extra["solver_seconds"] = round(self.used, 6)
        result.notes.append(
            f"optimal allocator: first round {'proven optimal' if o.optimal else 'time limit'}"
            f", spill cost {o.cost:g}, lower bound {o.lower_bound:g}, {o.core} node(s) left "
            f"to the solver after simplify ({o.variables} placement variables), "
            f"{self.used:.2f} s in all rounds"
            + ("" if self.all_optimal else "; a later round was not proven optimal"))


class Optimal(Allocator):
    """The exact allocator as a registry entry."""

    name = "optimal"
    description = "minimum spill cost by integer programming (OR-Tools CP-SAT), a yardstick"
    coalesces = False
    exact = True            # a yardstick: left out of corpus-wide runs (api.names)

    def color(self, problem: Problem, options) -> Coloring:
        limit = getattr(options, "time_limit", None)
        return solve(problem, DEFAULT_TIME_LIMIT if limit is None else float(limit)).coloring

    def open(self, fn, budget: int, options) -> Session:
        return OptimalSession(fn, budget, options)


register(Optimal())
