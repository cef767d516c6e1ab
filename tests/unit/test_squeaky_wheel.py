"""Compaction's squeaky wheel (issue 13; docs/decisions.md "Registers = MaxLive at K = 255"): the
program-order greedy below a register limit, a node that finds no placement moved to the front
of the order and the order colored again. On straight-line code mixing 32- and 64-bit values
the program order alone fragments the aligned pairs and ends a register above MaxLive; the
squeaky wheel reaches it, and compaction keeps the result, proven by the checker."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import DATA
from ptxalloc.alloc import compact as compact_module
from ptxalloc.alloc.api import Coloring, Problem, Program
from ptxalloc.alloc.briggs import color
from ptxalloc.alloc.coalesce import coalesce
from ptxalloc.alloc.compact import (compact, fewest_registers, greedy_colorings, high_water,
                                    squeaky_wheel)
from ptxalloc.analysis import analyze_function
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse
from ptxalloc.target.sm import profile_for
from ptxalloc.ir.registers import RegClass
from ptxalloc.target.units import GPR, RegFile, vreg_shape

HDR = (".version 7.0\n.target sm_80\n.address_size 64\n\n"
       ".shared .align 8 .u64 sh[64];\n.global .align 8 .u64 gout[64];\n\n")

# %r1 and %r2 take R0 and R1 in program order, %rd1 R2:R3; when %r1 and %r3 have died, %rd2
# finds R0:R1 half taken by %r2 and goes to R4:R5: 6 registers where at most 5 are live
# (%r2, %rd1, %rd2). Placing %rd2 first leaves %r2 a register beside the pairs.
FRAGMENTED_PAIRS = HDR + """.visible .entry fragmented_pairs()
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	ld.shared.u32 %r1, [sh+12];
	ld.shared.u32 %r2, [sh+40];
	ld.shared.u64 %rd1, [sh+16];
	st.global.u32 [gout+0], %r1;
	ld.shared.u32 %r3, [sh+20];
	st.global.u32 [gout+8], %r3;
	add.u64 %rd2, %rd1, %rd1;
	st.global.u32 [gout+16], %r2;
	st.global.u64 [gout+24], %rd1;
	ld.shared.u64 %rd3, [sh+32];
	st.global.u64 [gout+32], %rd2;
	st.global.u64 [gout+40], %rd3;
	ret;
}
"""


def _problem(text: str, k: int = 255, coalesced: bool = True) -> Problem:
    fn = parse(text).functions[0]
    p = Problem.from_analysis(analyze_function(fn, profile_for(None, "sm_80")), RegFile(k))
    if coalesced:
        coalesce(p)
    return p


def _assert_valid(p: Problem, start: dict[int, int], registers: int) -> None:
    """Every node placed on one of its placements below ``registers``, neighbours apart."""
    assert set(start) == set(p.members)
    for n, s in start.items():
        sh = p.shape[n]
        assert (s, sh.mask(s)) in p.regfile.placements(sh)
        assert s + sh.units <= 2 * registers
        for m in p.members:
            if m != n and p.interferes(n, m):
                assert not sh.mask(s) & p.shape[m].mask(start[m]), (n, m)


def test_program_order_misses_max_live_and_the_squeaky_wheel_reaches_it():
    p = _problem(FRAGMENTED_PAIRS)
    assert p.program.max_live == 5
    assert fewest_registers(greedy_colorings(p), p) == 6
    start = squeaky_wheel(p, 5)
    assert start is not None
    _assert_valid(p, start, 5)
    assert high_water(p, start) == 5
    assert squeaky_wheel(p, 4) is None          # below MaxLive there is nothing to find


def test_compaction_without_its_search_reaches_max_live(monkeypatch):
    """The search is switched off (no graph is small enough for it), so only the greedy
    colorings and the squeaky wheel run: the allocation uses MaxLive registers, is recorded
    as proven minimal, and the checker proves it."""
    monkeypatch.setattr(compact_module, "SEARCH_MAX_NODES", 0)
    for allocator in ("briggs", "fatpoint"):
        res = allocate(FRAGMENTED_PAIRS, registers=255, allocator=allocator,
                       knobs={"schedule": 0, "recompute": 0})
        (fr,) = res.functions
        assert fr.spilled_values == 0
        assert fr.max_live_legalized == 5
        assert fr.registers == 5, allocator
        assert fr.extra["registers_optimal"] is True
        assert fr.verified is True


def test_a_large_graph_one_above_max_live_gets_one_descent_at_it(monkeypatch):
    """Every graph counted as above the search's node limit and the squeaky wheel switched off:
    the greedy colorings end one register above MaxLive (6 against 5), and the one DSATUR
    descent (its steps a node raised for so small a graph) a large graph of a leaf function gets at its bound reaches 5, proven by the
    checker; with the descent off too (LARGE_SEARCH_MAX_NODES 0) briggs's count stays at 6
    (bisect_large's shape: 918 nodes, docs/decisions.md "Registers = MaxLive at K = 255,
    session 7")."""
    monkeypatch.setattr(compact_module, "SEARCH_MAX_NODES", 0)
    monkeypatch.setattr(compact_module, "squeaky_wheel", lambda p, registers: None)
    # six nodes: two steps a node leave no room to back out of the first dead end
    monkeypatch.setattr(compact_module, "LARGE_SEARCH_STEPS_PER_NODE", 20)
    knobs = {"schedule": 0, "recompute": 0, "SplitToMaxLive": 0}
    for allocator in ("briggs", "fatpoint"):
        (fr,) = allocate(FRAGMENTED_PAIRS, registers=255, allocator=allocator,
                         knobs=knobs).functions
        assert fr.max_live_legalized == 5
        assert fr.registers == 5, allocator
        assert fr.verified is True
    # briggs's own coloring is the one at 6 (fat-point's scan places %rd2 first by itself)
    monkeypatch.setattr(compact_module, "LARGE_SEARCH_MAX_NODES", 0)
    (fr,) = allocate(FRAGMENTED_PAIRS, registers=255, allocator="briggs", knobs=knobs).functions
    assert fr.registers == 6


def _many_fragmented_pairs(copies: int, fillers: int) -> str:
    """FRAGMENTED_PAIRS ``copies`` times over, one after another, then ``fillers`` values each
    loaded and stored at once: a graph of ``6 x copies + fillers`` nodes whose program-order
    colorings end one register above MaxLive (6 against 5)."""
    body = []
    for i in range(copies):
        r = [f"%r{3 * i + j}" for j in range(3)]
        d = [f"%rd{3 * i + j}" for j in range(3)]
        body += [f"ld.shared.u32 {r[0]}, [sh+12];", f"ld.shared.u32 {r[1]}, [sh+40];",
                 f"ld.shared.u64 {d[0]}, [sh+16];", f"st.global.u32 [gout+0], {r[0]};",
                 f"ld.shared.u32 {r[2]}, [sh+20];", f"st.global.u32 [gout+8], {r[2]};",
                 f"add.u64 {d[1]}, {d[0]}, {d[0]};", f"st.global.u32 [gout+16], {r[1]};",
                 f"st.global.u64 [gout+24], {d[0]};", f"ld.shared.u64 {d[2]}, [sh+32];",
                 f"st.global.u64 [gout+32], {d[1]};", f"st.global.u64 [gout+40], {d[2]};"]
    for j in range(fillers):
        body += [f"ld.shared.u32 %s{j}, [sh+4];", f"st.global.u32 [gout+4], %s{j};"]
    return (HDR + ".visible .entry many_fragmented_pairs()\n{\n"
            f"\t.reg .b32 %r<{3 * copies}>;\n\t.reg .b64 %rd<{3 * copies}>;\n"
            f"\t.reg .b32 %s<{fillers}>;\n" + "".join(f"\t{b}\n" for b in body)
            + "\tret;\n}\n")


def test_the_large_graph_descent_at_its_default_steps(monkeypatch):
    """A graph of 420 nodes (above SEARCH_MAX_NODES, below LARGE_SEARCH_MAX_NODES) one
    register above MaxLive, the squeaky wheel off: the one descent, at the default
    LARGE_SEARCH_STEPS_PER_NODE (2), reaches MaxLive, proven by the checker; without it (the
    descent off) briggs stays a register above."""
    text = _many_fragmented_pairs(10, 360)
    monkeypatch.setattr(compact_module, "squeaky_wheel", lambda p, registers: None)
    descents = []
    deep = compact_module._deep_search

    def counted(p, order, limit_units, steps):
        got = deep(p, order, limit_units, steps)
        descents.append((len(order), steps, type(got)))
        return got
    monkeypatch.setattr(compact_module, "_deep_search", counted)
    knobs = {"schedule": 0, "recompute": 0, "SplitToMaxLive": 0}
    (fr,) = allocate(text, registers=255, allocator="briggs", knobs=knobs).functions
    assert fr.max_live_legalized == 5
    assert fr.registers == 5
    assert fr.verified is True
    assert compact_module.LARGE_SEARCH_STEPS_PER_NODE == 2
    assert [(n, steps, kind) for n, steps, kind in descents] == [(420, 840, dict)]
    assert compact_module.SEARCH_MAX_NODES < 420 <= compact_module.LARGE_SEARCH_MAX_NODES
    monkeypatch.setattr(compact_module, "LARGE_SEARCH_MAX_NODES", 0)
    (fr,) = allocate(text, registers=255, allocator="briggs", knobs=knobs).functions
    assert fr.registers == 6


def test_a_large_graph_descent_that_searched_everything_proves_the_count(monkeypatch):
    """A 5-cycle (a clique of 2, three registers) among 400 nodes that interfere with nothing:
    above SEARCH_MAX_NODES, one register above its bounds, so it gets the one descent at 2
    registers, which tries every placement of the cycle and finds none (``False``, not a
    give-up): the count of 3 is then proven minimal, as the small-graph search records it.
    Without the descent nothing proves it."""
    n = 405
    adj = [0] * n
    for a in range(5):
        b = (a + 1) % 5
        adj[a] |= 1 << b
        adj[b] |= 1 << a
    shapes = [vreg_shape(RegClass.GPR32, 1)] * n
    points = [([v], [v]) for v in range(n)]
    prog = Program([list(d) for d, _ in points], [list(u) for _, u in points],
                   [False] * n, [(0, n, 0, 0)], [0], [1.0] * n, [0] * n, max_live=1)

    def coloring_of_three():
        p = Problem(RegFile(255), list(shapes), list(adj), [1.0] * n, [4] * n, [], [], prog)
        return p, Coloring(start={v: 2 * (v % 5 % 3) if v < 5 else 0 for v in range(n)})
    p, c = coloring_of_three()
    assert high_water(p, c.start) == 3
    assert compact(p, c, 2) is False
    assert c.optimal is True
    monkeypatch.setattr(compact_module, "LARGE_SEARCH_MAX_NODES", 0)
    p, c = coloring_of_three()
    assert compact(p, c, 2) is False
    assert c.optimal is False


def test_compact_keeps_a_coloring_the_squeaky_wheel_cannot_beat():
    """At MaxLive already: compaction changes nothing and proves the count."""
    p = _problem(FRAGMENTED_PAIRS)
    c = Coloring(start=squeaky_wheel(p, 5))
    assert compact(p, c, p.program.max_live) is False
    assert c.optimal is True
    assert high_water(p, c.start) == 5


# -- random straight-line code mixing 32- and 64-bit values ---------------------------------

@st.composite
def straight_line(draw) -> str:
    """Loads of 32- and 64-bit values, adds of two live values (converted to the add's width),
    and stores that end a value's life; every value still live is stored at the end."""
    body: list[str] = []
    live: list[str] = []
    count = {"r": 0, "rd": 0}

    def new(kind: str) -> str:
        count[kind] += 1
        return f"%{kind}{count[kind]}"

    def width(x: str, wide: bool) -> str:
        if x.startswith("%rd") == wide:
            return x
        y = new("rd" if wide else "r")
        body.append(f"\tcvt.u64.u32 {y}, {x};" if wide else f"\tcvt.u32.u64 {y}, {x};")
        return y
    stores = 0
    for op in draw(st.lists(st.integers(0, 2), min_size=4, max_size=40)):
        if op == 0 or len(live) < 2:
            wide = draw(st.booleans())
            x = new("rd" if wide else "r")
            offset = 8 * draw(st.integers(0, 7))
            body.append(f"\tld.shared.u{64 if wide else 32} {x}, [sh+{offset}];")
            live.append(x)
        elif op == 1:
            wide = draw(st.booleans())
            a = width(draw(st.sampled_from(live)), wide)
            b = width(draw(st.sampled_from(live)), wide)
            x = new("rd" if wide else "r")
            body.append(f"\tadd.u{64 if wide else 32} {x}, {a}, {b};")
            live.append(x)
        else:
            x = live.pop(draw(st.integers(0, len(live) - 1)))
            body.append(f"\tst.global.u{64 if x.startswith('%rd') else 32} "
                        f"[gout+{8 * (stores % 64)}], {x};")
            stores += 1
    for x in live:
        body.append(f"\tst.global.u{64 if x.startswith('%rd') else 32} "
                    f"[gout+{8 * (stores % 64)}], {x};")
        stores += 1
    return (HDR + ".visible .entry mixed()\n{\n"
            f"\t.reg .b32 %r<{count['r'] + 1}>;\n\t.reg .b64 %rd<{count['rd'] + 1}>;\n"
            + "\n".join(body) + "\n\tret;\n}\n")


@settings(max_examples=150, deadline=None)
@given(straight_line(), st.integers(0, 2))
def test_squeaky_wheel_colorings_are_valid_and_within_the_limit(text, above):
    """Whatever it returns is a coloring of every node below the limit asked for, keeping
    interfering nodes apart; it never answers below MaxLive (no such coloring exists)."""
    p = _problem(text)
    max_live = p.program.max_live
    for registers in (max_live - 1, max_live + above):
        start = squeaky_wheel(p, registers)
        if start is not None:
            _assert_valid(p, start, registers)
            assert registers >= max_live


@settings(max_examples=150, deadline=None)
@given(straight_line())
def test_compact_never_raises_the_count_and_stays_valid(text):
    """From Briggs's coloring, compaction only lowers the register count, never below MaxLive
    (straight-line code, no copies: every live set is a clique), and what it keeps is valid."""
    p = _problem(text)
    c = color(p)
    before = high_water(p, c.start)
    compact(p, c, p.program.max_live)
    after = high_water(p, c.start)
    assert p.program.max_live <= after <= before
    _assert_valid(p, c.start, after)


# -- Triton kernels (tests/data/triton) ------------------------------------------------------

@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("name,max_live,without_wheel", [("sm80_matmul.ptx", 120, 120),
                                                         ("sm80_attn_fwd.ptx", 93, 94)])
def test_triton_kernels_reach_max_live_at_k255(name, max_live, without_wheel, allocator,
                                               monkeypatch):
    """Without the squeaky wheel Briggs ends a register above MaxLive on attn_fwd (94:
    tuples of ``mma`` fragments and ``ld.v4`` results among the scalars; the matmul, its
    epilogue's addresses formed at the stores, it reaches 120 without); with it both
    allocators reach MaxLive of the scheduled code and the checker proves the allocation."""
    text = (DATA / "triton" / name).read_text()
    res = allocate(text, registers=255, allocator=allocator)
    (fr,) = res.functions
    assert fr.spilled_values == 0
    assert fr.max_live_legalized == max_live
    assert fr.registers == max_live
    assert fr.verified is True
    if allocator == "briggs":
        monkeypatch.setattr(compact_module, "squeaky_wheel", lambda p, target: None)
        (without,) = allocate(text, registers=255, allocator=allocator).functions
        assert without.registers == without_wheel


# -- "proven minimal" is a proof, checked by brute force ------------------------------------

@st.composite
def straight_line_with_copies(draw) -> str:
    """32-bit loads, copies of live values (a copy and its source hold one value, so they need
    not interfere and a coloring may use fewer registers than MaxLive), adds and stores."""
    body: list[str] = []
    live: list[str] = []
    n = 0
    stores = 0
    for op in draw(st.lists(st.integers(0, 3), min_size=3, max_size=14)):
        if op == 0 or len(live) < 2:
            n += 1
            body.append(f"\tld.shared.u32 %r{n}, [sh+{4 * draw(st.integers(0, 15))}];")
            live.append(f"%r{n}")
        elif op == 1:
            n += 1
            body.append(f"\tmov.b32 %r{n}, {draw(st.sampled_from(live))};")
            live.append(f"%r{n}")
        elif op == 2:
            n += 1
            body.append(f"\tadd.u32 %r{n}, {draw(st.sampled_from(live))}, "
                        f"{draw(st.sampled_from(live))};")
            live.append(f"%r{n}")
        else:
            x = live.pop(draw(st.integers(0, len(live) - 1)))
            body.append(f"\tst.global.u32 [gout+{8 * (stores % 64)}], {x};")
            stores += 1
    for x in live:
        body.append(f"\tst.global.u32 [gout+{8 * (stores % 64)}], {x};")
        stores += 1
    return (HDR + ".visible .entry copies()\n{\n"
            f"\t.reg .b32 %r<{n + 1}>;\n" + "\n".join(body) + "\n\tret;\n}\n")


def _colorable(p: Problem, colors: int) -> bool:
    """Brute force, independent of compaction: can the 32-bit nodes of ``p`` take ``colors``
    registers with interfering nodes apart?"""
    nodes = sorted(p.members)
    color_of: dict[int, int] = {}

    def place(i: int) -> bool:
        if i == len(nodes):
            return True
        n = nodes[i]
        taken = {color_of[m] for m in color_of if p.interferes(n, m)}
        for c in range(min(colors, len(color_of) + 1)):
            if c not in taken:
                color_of[n] = c
                if place(i + 1):
                    return True
                del color_of[n]
        return False
    return place(0)


@settings(max_examples=150, deadline=None)
@given(straight_line_with_copies(), st.booleans())
def test_a_count_claimed_minimal_has_no_coloring_one_register_smaller(text, coalesced):
    """Compaction marks a count minimal only when no coloring of the graph uses fewer
    registers; reaching MaxLive is no such proof when copies make values share a register."""
    p = _problem(text, coalesced=coalesced)
    c = color(p)
    compact(p, c, p.program.max_live)
    registers = high_water(p, c.start)
    _assert_valid(p, c.start, registers)
    if c.optimal:
        assert registers <= 1 or not _colorable(p, registers - 1)


@settings(max_examples=150, deadline=None)
@given(straight_line_with_copies())
def test_an_allocation_claimed_minimal_has_none_one_register_smaller(text):
    """The allocation's ``registers_optimal`` is a claim about the function, not about the
    coalesced graph compaction saw: merging copies can raise the count, so the claim holds
    only when the graph before coalescing has no coloring with one register fewer (found by
    review: a count claimed minimal that the same tool beat at a smaller budget)."""
    (fr,) = allocate(text, registers=255, knobs={"schedule": 0, "recompute": 0}).functions
    assert fr.spilled_values == 0
    if fr.extra["registers_optimal"] and fr.registers > 1:
        assert not _colorable(_problem(text, coalesced=False), fr.registers - 1)


def test_a_count_the_tool_beats_at_a_smaller_budget_is_not_claimed_minimal():
    path = DATA / "hand" / "optimal_claim_copies.ptx"
    # as written (recomputed at its use, a copy's value needs 4 registers at once at 255 too)
    as_written = {"recompute": 0}
    (fr,) = allocate(path.read_text(), registers=255, knobs=as_written).functions
    assert fr.registers == 5 and fr.extra["registers_optimal"] is False
    (at4,) = allocate(path.read_text(), registers=4, knobs=as_written).functions
    assert at4.registers == 4 and at4.spilled_values == 0 and at4.verified is True


# -- each node gathers only the neighbours colored before it --------------------------------

def _reference_greedy(p: Problem, order: list[int], best_fit: bool, limit_units=None):
    """The greedy as first written: a node's forbidden units from every colored neighbour."""
    start = dict(p.precolored)
    partners = compact_module._graph(p).partners
    for n in order:
        sh = p.shape[n]
        forbidden = 0
        for m, sm in start.items():
            if m != n and p.interferes(n, m):
                forbidden |= p.shape[m].mask(sm)
        choice = None
        for m in partners.get(n, ()):
            sm = start.get(m)
            if sm is not None and not sh.mask(sm) & forbidden and (
                    limit_units is None or sh.file != GPR or sm + sh.units <= limit_units):
                choice = sm
                break
        if choice is None:
            starts = compact_module._start_mask(
                (s, mask) for s, mask in p.regfile.placements(sh)
                if limit_units is None or sh.file != GPR or s + sh.units <= limit_units)
            choice = compact_module._lowest_free(starts, sh.units, forbidden,
                                                 best_fit and sh.units < 4 and sh.file == GPR)
            if choice is None:
                return None
        start[n] = choice
    return start


@settings(max_examples=150, deadline=None)
@given(st.one_of(straight_line(), straight_line_with_copies()), st.booleans(), st.booleans(),
       st.lists(st.integers(0, 10_000), max_size=6), st.integers(-1, 1))
def test_the_greedy_gathers_every_colored_neighbour(text, coalesced, best_fit, front, above):
    """The greedy gathers a node's earlier neighbours in program order, plus those of the
    nodes its order takes ahead (the squeaky wheel's moved to the front, the wider values of
    the wide-first order): the same colorings as gathering every colored neighbour, in the
    program order, with nodes moved to the front, and wide values first."""
    p = _problem(text, coalesced=coalesced)
    order = compact_module._graph(p).order
    if not order:
        return
    limit = 2 * (p.program.max_live + above)
    moved, current = 0, list(order)
    for k in front:                                 # the squeaky wheel's moves
        n = current[k % len(current)]
        current.remove(n)
        current.insert(0, n)
        moved |= 1 << n
    for run, ahead in ((order, 0), (current, moved)):
        for limit_units in (None, limit):
            got = compact_module._greedy(p, run, best_fit, limit_units, ahead=ahead)
            want = _reference_greedy(p, run, best_fit, limit_units)
            assert got == want and (got is None or list(got) == list(want))
    # the wide-first coloring, with its masks of wider nodes
    wide_first = sorted(order, key=lambda n: -p.shape[n].units)
    want = _reference_greedy(p, wide_first, True)
    got = greedy_colorings(p)[2]
    assert got == want and (got is None or list(got) == list(want))
