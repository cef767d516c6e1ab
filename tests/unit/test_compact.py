"""Register compaction (issue 4; docs/decisions.md "Register compaction"): once nothing is
spilled, the final graph is recolored to lower the high-water mark; on straight-line code in
SSA form with 32-bit values that reaches MaxLive, the lower bound. It never changes a spill
decision, never leaves the budget and keeps every interfering pair apart."""

from __future__ import annotations

import pytest

from conftest import DATA, assert_verified, corpus_root
from ptxalloc.alloc.api import Coloring
from ptxalloc.alloc.briggs import color
from ptxalloc.alloc.coalesce import coalesce
from ptxalloc.alloc.compact import compact, high_water
from ptxalloc.alloc.driver import Options
from ptxalloc.alloc.api import Problem
from ptxalloc.analysis import analyze_function
from ptxalloc.pipeline import allocate, allocate_module
from ptxalloc.ptx import parse
from ptxalloc.target.sm import profile_for
from ptxalloc.target.units import RegFile

HDR = (".version 7.0\n.target sm_80\n.address_size 64\n\n"
       ".shared .align 4 .u32 sh[64];\n.global .align 4 .u32 gout[64];\n\n")


def straight(n_live: int, waves: int = 3) -> str:
    """Straight-line SSA code: ``waves`` times, load ``n_live`` values, then fold them into one
    sum that is stored; MaxLive is n_live + 1 at most."""
    body = []
    r = 0
    for w in range(waves):
        first = r + 1
        for i in range(n_live):
            r += 1
            body.append(f"\tld.shared.u32 %r{r}, [sh+{4 * i}];")
        acc = first
        for i in range(1, n_live):
            r += 1
            body.append(f"\tadd.u32 %r{r}, %r{acc}, %r{first + i};")
            acc = r
        body.append(f"\tst.global.u32 [gout+{4 * w}], %r{acc};")
    return (HDR + ".visible .entry straight()\n{\n"
            f"\t.reg .b32 %r<{r + 1}>;\n" + "\n".join(body) + "\n\tret;\n}\n")


MIXED = HDR + """.visible .entry mixed()
{
	.reg .b32 %r<12>;
	ld.shared.u32 %r1, [sh];
	ld.shared.u32 %r2, [sh+4];
	mul.lo.u32 %r3, %r1, %r2;
	ld.shared.u32 %r4, [sh+8];
	add.u32 %r5, %r3, %r4;
	ld.shared.u32 %r6, [sh+12];
	ld.shared.u32 %r7, [sh+16];
	mad.lo.u32 %r8, %r6, %r7, %r5;
	add.u32 %r9, %r8, %r1;
	add.u32 %r10, %r9, %r2;
	st.global.u32 [gout], %r10;
	st.global.u32 [gout+4], %r4;
	ret;
}
"""


@pytest.mark.parametrize("knobs", [{"schedule": 0}, {}], ids=["as-written", "scheduled"])
@pytest.mark.parametrize("text", [straight(4), straight(7, 2), straight(12, 4), MIXED],
                         ids=["4x3", "7x2", "12x4", "mixed"])
def test_registers_equal_max_live_on_straight_line_code(text, knobs):
    res = allocate(text, registers=255, knobs=knobs)
    fr = res.functions[0]
    assert fr.spilled_values == 0
    # the lower bound is MaxLive of the code colored: the schedule (on by default) lowers it
    assert fr.max_live_legalized <= fr.max_live
    assert fr.registers == fr.max_live_legalized
    if knobs:
        assert fr.registers == fr.max_live
    assert fr.extra["registers_optimal"] is True
    assert fr.verified is True


def _problem(text: str, k: int) -> Problem:
    fn = parse(text).functions[0]
    an = analyze_function(fn, profile_for(None, "sm_80"))
    p = Problem.from_analysis(an, RegFile(k))
    coalesce(p)
    return p


def _valid(p: Problem, start: dict[int, int], k: int) -> None:
    for n, s in start.items():
        assert (s, ((1 << p.shape[n].units) - 1) << s) in p.regfile.placements(p.shape[n])
        assert s + p.shape[n].units <= 2 * k
        for m in p.members:
            if m != n and p.interferes(n, m) and m in start:
                a = ((1 << p.shape[n].units) - 1) << s
                b = ((1 << p.shape[m].units) - 1) << start[m]
                assert not a & b, (n, m)


def test_compact_recolors_a_wasteful_coloring_down_to_max_live():
    text = straight(6, 3)
    p = _problem(text, 255)
    nodes = sorted(p.members)
    wasteful = Coloring(start={n: 2 * i for i, n in enumerate(nodes)})    # one register each
    _valid(p, wasteful.start, 255)
    assert high_water(p, wasteful.start) == len(nodes)
    max_live = p.program.max_live
    assert compact(p, wasteful, max_live) is True
    _valid(p, wasteful.start, 255)
    assert high_water(p, wasteful.start) == max_live
    assert wasteful.optimal is True


def test_compact_leaves_a_spilling_coloring_alone():
    p = _problem(straight(6, 1), 3)
    c = color(p)
    assert c.spilled
    before = dict(c.start)
    assert compact(p, c, p.program.max_live) is False
    assert c.start == before


def test_compact_never_raises_the_count():
    p = _problem(MIXED, 255)
    c = color(p)
    before = high_water(p, c.start)
    compact(p, c, p.program.max_live)
    assert high_water(p, c.start) <= before
    _valid(p, c.start, 255)


@pytest.mark.parametrize("name", ["hand/loop_backedge.ptx", "hand/diamond.ptx",
                                  "vectors_sm80.ptx", "misc_sm80.ptx", "pressure_sm80.ptx"])
def test_compaction_on_never_uses_more_registers_than_off(name):
    module = parse((DATA / name).read_text())
    on = allocate_module(module, 255, verify=False, options=Options(compact=True))
    off = allocate_module(module, 255, verify=False, options=Options(compact=False))
    for a, b in zip(on.functions, off.functions):
        assert a.name == b.name
        assert a.registers <= b.registers
        assert a.spilled_values == b.spilled_values     # compaction changes no spill decision
        assert a.spill_stores_bytes == b.spill_stores_bytes


@pytest.mark.parametrize("name", ["hand/loop_backedge.ptx", "hand/diamond.ptx",
                                  "hand/scopes.ptx", "hand/setp_pair.ptx", "hand/brx.ptx"])
@pytest.mark.parametrize("knobs", [{"schedule": 0}, {}], ids=["as-written", "scheduled"])
def test_small_hand_files_reach_max_live_at_k255(name, knobs):
    res = allocate((DATA / name).read_text(), registers=255, verify=False, knobs=knobs)
    for fr in res.functions:
        # MaxLive of the code colored, which the schedule (on by default) can lower
        assert fr.max_live_legalized <= fr.max_live
        assert fr.registers == fr.max_live_legalized, (fr.name, fr.registers,
                                                       fr.max_live_legalized)
        if knobs:
            assert fr.registers == fr.max_live


# -- the exact search, on random graphs against brute force ---------------------------------

class _Graph:
    """What _search reads of a Problem: shapes, adjacency bitsets, precolored nodes, the file."""

    def __init__(self, shapes: list, edges: set, k: int):
        self.shape = dict(enumerate(shapes))
        self.adj = [0] * len(shapes)
        for a, b in edges:
            self.adj[a] |= 1 << b
            self.adj[b] |= 1 << a
        self.precolored: dict[int, int] = {}
        self.regfile = RegFile(k)


def _colorable(g: _Graph, limit_units: int) -> bool:
    """Brute force: does any placement of every node below limit_units keep neighbours
    apart?"""
    import itertools
    n = len(g.shape)
    opts = [[(s, m) for s, m in g.regfile.placements(g.shape[v]) if s + g.shape[v].units
             <= limit_units] for v in range(n)]
    for choice in itertools.product(*opts):
        if all(not (choice[a][1] & choice[b][1]) for a in range(n) for b in range(n)
               if g.adj[a] >> b & 1):
            return True
    return False


@pytest.mark.parametrize("seed", range(60))
def test_search_is_exact_on_small_graphs(seed):
    """_search finds a coloring exactly when one exists (32- and 64-bit values, a few
    registers), and what it returns keeps every interfering pair apart."""
    import random

    from ptxalloc.alloc.compact import _search
    from ptxalloc.target.units import GPR, Shape
    rnd = random.Random(seed)
    n = rnd.randint(2, 7)
    shapes = [Shape(GPR, 4, 4) if rnd.random() < 0.3 else Shape(GPR, 2, 2) for _ in range(n)]
    edges = {(a, b) for a in range(n) for b in range(a + 1, n) if rnd.random() < 0.5}
    g = _Graph(shapes, edges, 8)
    for regs in range(1, 7):
        got = _search(g, list(range(n)), 2 * regs, 10 ** 6)
        assert got is not None
        assert (got is not False) == _colorable(g, 2 * regs), (regs, shapes, edges)
        if got:
            for a, b in edges:
                ua = ((1 << shapes[a].units) - 1) << got[a]
                ub = ((1 << shapes[b].units) - 1) << got[b]
                assert not ua & ub
            assert all(got[v] + shapes[v].units <= 2 * regs for v in range(n))


def _plain_search(g: _Graph, order: list[int], limit_units: int, steps: int):
    """The search as a plain DSATUR with forward checking (what _search did before it kept
    each node's free starts and saturation as its neighbours are colored): the same choice of
    node, placements lowest first, one step per placement tried. Returns (the answer, steps
    left)."""
    from ptxalloc.target.units import GPR, blocked_starts
    start = dict(g.precolored)
    index = {n: i for i, n in enumerate(order)}
    nbrs = [[index[m] for m in range(len(g.adj)) if g.adj[n] >> m & 1 and m in index]
            for n in order]
    below = []
    for n in order:
        sh = g.shape[n]
        below.append(sum(1 << s for s, _ in g.regfile.placements(sh)
                         if sh.file != GPR or s + sh.units <= limit_units))
    left = [steps]

    def forbidden(i: int) -> int:
        f = 0
        for m in range(len(g.adj)):
            if g.adj[order[i]] >> m & 1 and m in start:
                f |= g.shape[m].mask(start[m])
        return f

    def free(i: int) -> int:
        return below[i] & ~blocked_starts(forbidden(i), g.shape[order[i]].units)

    def place() -> bool:
        todo = [i for i, n in enumerate(order) if n not in start]
        if not todo:
            return True
        # the most units taken by colored neighbours, then the most neighbours, then first
        i = max(todo, key=lambda i: (forbidden(i).bit_count(), g.adj[order[i]].bit_count(),
                                     -i))
        for s in range(limit_units):
            if not free(i) >> s & 1:
                continue
            left[0] -= 1
            if left[0] < 0:
                raise OverflowError
            before = {j: forbidden(j) for j in nbrs[i] if order[j] not in start}
            start[order[i]] = s
            # forward checking: a neighbour this placement takes units from has room left
            if all(free(j) for j in before if forbidden(j) != before[j]) and place():
                return True
            del start[order[i]]
        return False

    try:
        return (start if place() else False), left[0]
    except OverflowError:
        return None, -1


@pytest.mark.parametrize("seed", range(40))
def test_search_is_the_plain_dsatur_search(seed):
    """_search keeps each uncolored node's free starts and saturation up to date as its
    neighbours are colored instead of recomputing them: on random graphs of 16-, 32-, 64-
    and 128-bit values with precolored nodes it returns what the plain search returns — the
    same coloring, the same proof of none, and giving up after the same number of steps
    (allocations stay byte for byte the same)."""
    import random

    from ptxalloc.alloc.compact import _search
    from ptxalloc.target.units import B128, GPR32, GPR64, H16
    rnd = random.Random(seed)
    n = rnd.randint(3, 10)
    shapes = [rnd.choice((H16, GPR32, GPR32, GPR32, GPR64, B128)) for _ in range(n)]
    edges = {(a, b) for a in range(n) for b in range(a + 1, n) if rnd.random() < 0.5}
    g = _Graph(shapes, edges, 12)
    if rnd.random() < 0.5:
        v = rnd.randrange(n)
        g.precolored[v] = rnd.choice([s for s, _ in g.regfile.placements(shapes[v])][:4])
    order = [v for v in range(n) if v not in g.precolored]
    for regs in range(2, 11, 2):
        for steps in (3, 10, 40, 10 ** 5):
            expected, left = _plain_search(g, order, 2 * regs, steps)
            got = _search(g, order, 2 * regs, steps)
            assert got == expected, (regs, steps, shapes, edges, g.precolored)
            used = steps - left
            if expected is not None and used:
                # the same number of steps: with one fewer it gives up
                assert _search(g, order, 2 * regs, used) == expected
                assert _search(g, order, 2 * regs, used - 1) is None


@pytest.mark.parametrize("seed", range(12))
def test_search_picks_the_same_nodes_with_numpy(seed, monkeypatch):
    """On graphs of SEARCH_NUMPY_NODES nodes and more the search finds its next node by
    numpy's argmax over a copy of the keys: the same coloring, the same proof of none, and
    giving up at the same step as with the list's max (random graphs of 32- and 64-bit
    values, 64-90 nodes)."""
    import random

    import numpy

    import ptxalloc.alloc.compact as compact_module
    from ptxalloc.target.units import GPR32, GPR64
    rnd = random.Random(seed)
    n = rnd.randint(compact_module.SEARCH_NUMPY_NODES, 90)
    shapes = [GPR64 if rnd.random() < 0.25 else GPR32 for _ in range(n)]
    density = rnd.uniform(0.05, 0.3)
    edges = {(a, b) for a in range(n) for b in range(a + 1, n) if rnd.random() < density}
    g = _Graph(shapes, edges, 255)
    order = list(range(n))
    asked = []
    for regs in range(4, 40, 5):
        for steps in (n, 4 * n, 10 ** 4):
            monkeypatch.setattr(compact_module, "SEARCH_NUMPY_NODES", 10 ** 9)
            with_list = compact_module._search(g, order, 2 * regs, steps)
            monkeypatch.setattr(compact_module, "SEARCH_NUMPY_NODES", 0)
            monkeypatch.setattr(compact_module, "numpy_when_worth",
                                lambda work: asked.append(work) or numpy)
            assert compact_module._search(g, order, 2 * regs, steps) == with_list
    assert asked


def _tight_pair_graph(rnd, w_regs: int):
    """Two tuples of ``w_regs`` registers (pairs or quads), each beside a clique of 32-bit
    values filling every other register of a file of ``registers``; the cliques share some
    values, the values of one side only interfere at random with the other's, and a few
    values beside them interfere at random with all of it."""
    from ptxalloc.target.units import B128, GPR32, GPR64
    registers = w_regs + rnd.randint(1, 6 - w_regs // 2)
    side = registers - w_regs
    common = rnd.randint(0, side)
    only = side - common
    shapes = [GPR64 if w_regs == 2 else B128] * 2
    s_nodes = list(range(2, 2 + common))
    one = list(range(2 + common, 2 + common + only))
    two = list(range(2 + common + only, 2 + common + 2 * only))
    extra = list(range(2 + common + 2 * only, 2 + common + 2 * only + rnd.randint(0, 2)))
    shapes += [GPR32] * (common + 2 * only + len(extra))
    edges = set()
    for q, mine in ((0, s_nodes + one), (1, s_nodes + two)):
        edges |= {(q, m) for m in mine}
        edges |= {(a, b) for a in mine for b in mine if a < b}
    edges |= {(a, b) for a in one for b in two if rnd.random() < 0.6}
    scalars = s_nodes + one + two
    edges |= {(min(a, b), max(a, b)) for a in extra for b in scalars + extra
              if a != b and rnd.random() < 0.3}
    g = _Graph(shapes, edges, 12)
    g.members = {v: [v] for v in range(len(shapes))}
    return g, registers


@pytest.mark.parametrize("seed", range(150))
def test_tight_tuples_never_rule_out_a_count_that_has_a_coloring(seed):
    """tight_tuples_rule_out is a proof: whenever it says no coloring fits in K registers,
    the exhaustive search finds none (pairs and quads, random neighbourhoods)."""
    import random

    from ptxalloc.alloc.compact import _search, tight_tuples_rule_out
    rnd = random.Random(seed)
    g, registers = _tight_pair_graph(rnd, rnd.choice((2, 4)))
    order = list(range(len(g.shape)))
    for regs in range(max(1, registers - 1), registers + 2):
        if tight_tuples_rule_out(g, regs):
            assert _search(g, order, 2 * regs, 10 ** 7) is False, (regs, g.shape, g.adj)


def test_tight_tuples_rule_out_some_random_counts():
    """The graphs above are not all out of its reach: it rules out their tight count in some
    (one side's value interfering with the whole other side) and not in others."""
    import random

    from ptxalloc.alloc.compact import tight_tuples_rule_out
    ruled_out = 0
    for seed in range(150):
        rnd = random.Random(seed)
        g, registers = _tight_pair_graph(rnd, rnd.choice((2, 4)))
        ruled_out += tight_tuples_rule_out(g, registers)
    assert 10 < ruled_out < 140


def test_tight_tuples_rule_out_the_convolution_row_shape():
    """convolutionTexture's convolutionRow<4> after coalescing (captured, renumbered): the
    coordinate quad of the fourth fetch beside the two coordinates and three partial sums,
    the last fetch's beside one coordinate and four partial sums; the partial sum the last
    fetch adds interferes with the coordinate it no longer reads. MaxLive (and the clique)
    is 9, no coloring fits in 9 (the exhaustive search agrees), and the two tight quads say
    so without searching."""
    from ptxalloc.alloc.compact import _search, clique_registers, tight_tuples_rule_out
    from ptxalloc.target.units import B128, GPR32
    # 0..5: x, y, partial sums p1..p3, p4; 6: quad of fetch 4; 7: quad of the last fetch
    shapes = [GPR32] * 6 + [B128, B128]
    first, last = [0, 1, 2, 3, 4], [0, 2, 3, 4, 5]
    edges = {(a, b) for a in range(6) for b in range(a + 1, 6)}      # all live at once
    edges |= {(m, 6) for m in first} | {(m, 7) for m in last}
    g = _Graph(shapes, edges, 12)
    g.members = {v: [v] for v in range(len(shapes))}
    assert clique_registers(g) == 9
    assert tight_tuples_rule_out(g, 9) and not tight_tuples_rule_out(g, 10)
    assert _search(g, list(range(8)), 18, 10 ** 6) is False
    assert _search(g, list(range(8)), 20, 10 ** 6)
    # the pair that does not interfere may share a register: then one block holds both
    g2 = _Graph(shapes, edges - {(1, 5)}, 12)
    g2.members = g.members
    assert not tight_tuples_rule_out(g2, 9) and _search(g2, list(range(8)), 18, 10 ** 6)


def test_search_step_limit_is_a_fixed_amount_of_work():
    """The step limit shrinks as graphs grow (a step walks the uncolored nodes), never above
    SEARCH_STEPS, and small graphs keep the whole SEARCH_STEPS."""
    from ptxalloc.alloc.compact import SEARCH_MAX_NODES, SEARCH_STEPS, SEARCH_WORK, search_steps
    limits = [search_steps(n) for n in range(1, SEARCH_MAX_NODES + 1)]
    assert limits == sorted(limits, reverse=True)
    assert limits[0] == SEARCH_STEPS
    assert all(s * n <= SEARCH_WORK for n, s in enumerate(limits, 1) if s < SEARCH_STEPS)
    assert search_steps(SEARCH_MAX_NODES) == SEARCH_WORK // SEARCH_MAX_NODES < SEARCH_STEPS


@pytest.mark.parametrize("seed", range(60))
def test_clique_bound_never_exceeds_the_fewest_registers(seed):
    """clique_registers is a lower bound: no count below it has a coloring (brute force), and
    on a complete graph it is exact (every node needs its own units)."""
    import random

    from ptxalloc.alloc.compact import clique_registers
    from ptxalloc.target.units import GPR, Shape
    rnd = random.Random(seed)
    n = rnd.randint(1, 7)
    shapes = [Shape(GPR, 4, 4) if rnd.random() < 0.3 else Shape(GPR, 2, 2) for _ in range(n)]
    edges = {(a, b) for a in range(n) for b in range(a + 1, n) if rnd.random() < 0.6}
    g = _Graph(shapes, edges, 16)
    g.members = g.shape
    bound = clique_registers(g)
    assert bound >= max(s.units for s in shapes) // 2
    assert not any(_colorable(g, 2 * regs) for regs in range(1, bound))
    complete = _Graph(shapes, {(a, b) for a in range(n) for b in range(a + 1, n)}, 16)
    complete.members = complete.shape
    assert clique_registers(complete) == sum(s.units for s in shapes) // 2


@pytest.mark.corpus
@pytest.mark.skipif(corpus_root() is None, reason="../shared/corpus is absent")
def test_skipped_coalesced_search_changes_no_allocation(monkeypatch):
    """convolutionTexture.ptx (corpus): coalescing merges texture results into quads whose
    graph needs far more registers than the graph before coalescing. The coalesced graph's
    search is skipped there (a clique needs more than the plain graph's greedy count), and the
    allocation is byte for byte the one the search would have led to."""
    import ptxalloc.alloc.compact as compact_module
    import ptxalloc.alloc.driver as driver
    from ptxalloc.ptx import parse_file
    path = str(corpus_root() / "gpuocelot/tests/ptx/sdk2.2/convolutionTexture.ptx")
    monkeypatch.setattr(compact_module, "_searched", {})
    searches = []
    real_search = compact_module._search
    monkeypatch.setattr(compact_module, "_search",
                        lambda *a: searches.append(1) or real_search(*a))
    fast = allocate_module(parse_file(path))
    skipped = len(searches)
    real_compact = driver.compact
    monkeypatch.setattr(driver, "compact", lambda *a, rival=None, **k: real_compact(*a, **k))
    monkeypatch.setattr(compact_module, "_searched", {})
    searches.clear()
    full = allocate_module(parse_file(path))
    assert skipped < len(searches)
    assert fast.ptx == full.ptx
    assert_verified(fast)


def test_coalesced_graph_a_clique_rules_out_is_not_colored(monkeypatch):
    """When a clique of the coalesced graph needs more registers than MaxLive and than the
    greedy colorings of the graph before coalescing, that graph wins whatever compaction
    makes of the coalesced one: nothing of it is colored (hand/spill_vectorize.ptx at
    ptxas's limit), and the allocation is byte for byte the one coloring it gives."""
    import ptxalloc.alloc.compact as compact_module
    import ptxalloc.alloc.driver as driver
    from ptxalloc.ptx import parse_file
    path = str(DATA / "hand" / "spill_vectorize.ptx")
    real_compact, real_greedy = driver.compact, compact_module.greedy_colorings
    calls = {"greedy": 0, "left": 0}

    def greedy(p):
        calls["greedy"] += 1
        return real_greedy(p)

    def counting(p, coloring, *a, **k):
        before = calls["greedy"]
        changed = real_compact(p, coloring, *a, **k)
        if k.get("rival_tried") and calls["greedy"] == before and not coloring.spilled:
            calls["left"] += 1
            assert not changed and coloring.optimal is False
        return changed
    monkeypatch.setattr(compact_module, "greedy_colorings", greedy)
    monkeypatch.setattr(driver, "compact", counting)
    fast = allocate_module(parse_file(path))
    assert calls["left"] == 1
    monkeypatch.setattr(driver, "compact",
                        lambda *a, rival_tried=False, **k: real_compact(*a, **k))
    full = allocate_module(parse_file(path))
    assert fast.ptx == full.ptx
    assert_verified(fast)


def test_graph_without_merges_is_not_compacted_twice(monkeypatch):
    """When coalescing merged nothing, the graph before coalescing is the same graph: trying it
    again is skipped, and the allocation is the one trying it gives (sm80_vector_add)."""
    from ptxalloc.ptx import parse_file
    path = str(DATA / "triton" / "sm80_vector_add.ptx")
    fast = allocate_module(parse_file(path))
    real_init = Problem.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.merges = 1                 # as if coalescing had merged something: no skipping
    monkeypatch.setattr(Problem, "__init__", init)
    full = allocate_module(parse_file(path))
    assert fast.ptx == full.ptx
    assert_verified(fast)


def test_a_search_asked_again_is_answered_from_memory(monkeypatch):
    """Two copies of one kernel (as templates instantiate them) ask compaction the same
    searches: the second copy's are answered from memory, and both copies get the same
    allocation. (With the schedule's stores-last order the kernel colors at its bound without a
    search: the first order alone, ``ScheduleStoresLast=0``, keeps the code that needs one.)"""
    import ptxalloc.alloc.compact as compact_module
    text = (DATA / "triton" / "sm80_vector_add.ptx").read_text()
    head, _, rest = text.partition(".visible .entry add_kernel(")
    kernel_text = ".visible .entry add_kernel(" + rest
    twice = head + kernel_text + "\n" + kernel_text.replace("add_kernel(", "add_kernel_again(")
    monkeypatch.setattr(compact_module, "_searched", {})
    # the squeaky wheel reaches this kernel's bound before any search: off, so that it searches
    monkeypatch.setattr(compact_module, "squeaky_wheel", lambda *a, **k: None)
    ran = []
    real_search = compact_module._search
    monkeypatch.setattr(compact_module, "_search", lambda *a: ran.append(1) or real_search(*a))
    asked = []
    real_remembered = compact_module._remembered_search
    monkeypatch.setattr(compact_module, "_remembered_search",
                        lambda *a: asked.append(1) or real_remembered(*a))
    res = allocate_module(parse(twice), options=Options(knobs={"ScheduleStoresLast": 0}))
    first, second = res.functions
    assert ran and len(asked) == 2 * len(ran)
    assert first.registers == second.registers
    body = res.ptx.split(".visible .entry add_kernel_again(")
    assert body[1].strip() == body[0].split(".visible .entry add_kernel(")[1].strip()
    assert_verified(res)


def test_a_squeaky_wheel_asked_again_is_answered_from_memory(monkeypatch):
    """Two copies of one kernel ask compaction the same squeaky-wheel runs: the second copy's
    are answered from memory (a copy of the coloring), and both copies get the same
    allocation, the one computing every run gives."""
    import ptxalloc.alloc.compact as compact_module
    text = (DATA / "triton" / "sm80_vector_add.ptx").read_text()
    head, _, rest = text.partition(".visible .entry add_kernel(")
    kernel_text = ".visible .entry add_kernel(" + rest
    twice = head + kernel_text + "\n" + kernel_text.replace("add_kernel(", "add_kernel_again(")
    options = Options(knobs={"ScheduleStoresLast": 0})
    monkeypatch.setattr(compact_module, "_searched", {})
    ran, asked = [], []
    real_run, real_asked = compact_module._squeaky_wheel, compact_module.squeaky_wheel
    monkeypatch.setattr(compact_module, "_squeaky_wheel",
                        lambda *a: ran.append(1) or real_run(*a))
    monkeypatch.setattr(compact_module, "squeaky_wheel",
                        lambda *a, **k: asked.append(1) or real_asked(*a, **k))
    res = allocate_module(parse(twice), options=options)
    assert ran and len(asked) == 2 * len(ran)
    body = res.ptx.split(".visible .entry add_kernel_again(")
    assert body[1].strip() == body[0].split(".visible .entry add_kernel(")[1].strip()
    # with nothing remembered between the copies, the same output
    monkeypatch.setattr(compact_module, "_remembered", lambda key, compute: compute())
    ran.clear()
    asked.clear()
    assert allocate_module(parse(twice), options=options).ptx == res.ptx
    assert len(ran) == len(asked)
    assert_verified(res)
