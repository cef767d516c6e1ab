"""Briggs optimistic coloring (issue 4, SPEC 4.4): select takes the lowest free placement its
class and alignment allow (bank-conflict partners only steer among free placements), a node
with no free placement is an actual spill, 64-bit values at K = 15 use the 7 pairs R0:R1 ..
R12:R13 and never R14, register tuples are consecutive and aligned, and the simplify order
follows the seeds' worklists."""

from __future__ import annotations

import re

import pytest

from conftest import DATA
from ptxalloc.alloc.briggs import BANKS, color
from ptxalloc.alloc.coalesce import coalesce
from ptxalloc.alloc.api import Problem
from ptxalloc.analysis import analyze_function
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse, parse_file
from ptxalloc.target.sm import profile_for
from ptxalloc.target.units import GPR32, GPR64, RegFile

HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"


def problem_of(fn, k: int, do_coalesce: bool = True) -> Problem:
    an = analyze_function(fn, profile_for(None, "sm_80"))
    p = Problem.from_analysis(an, RegFile(k))
    if do_coalesce:
        coalesce(p)
    return p


def check_select(p: Problem, coloring) -> int:
    """Replay select: every node takes the lowest free placement, except that a node with
    colored bank partners may take the lowest free placement outside their banks. Returns how
    many nodes were checked."""
    start: dict[int, int] = dict(p.precolored)
    bank_adj = p.bank_adj or [0] * p.nregs        # None at 32 registers or fewer: no banks
    checked = 0
    spilled = set(coloring.spilled)
    for n in reversed(coloring.stack):
        sn = p.shape[n]
        forbidden = 0
        for m in range(p.nregs):
            if p.adj[n] >> m & 1 and m in start:
                forbidden |= ((1 << p.shape[m].units) - 1) << start[m]
        free = [s for s, mask in p.regfile.placements(sn) if not mask & forbidden]
        if n in spilled:
            assert not free, f"node {n} spilled with free placements {free}"
            continue
        got = coloring.start[n]
        assert got in free, f"node {n} took a placement that is not free"
        partners = 0
        for v in p.members[n]:
            partners |= bank_adj[v]
        banks = {((start[p.find(m)] + p.offset[m]) // 2) % BANKS
                 for m in range(p.nregs) if partners >> m & 1
                 and p.find(m) in start and p.find(m) != n}
        allowed = {free[0]}
        if banks:
            allowed |= {next((s for s in free if (s // 2) % BANKS not in banks), free[0])}
        assert got in allowed, (n, got, free[:4], banks)
        start[n] = got
        checked += 1
    return checked


# -- lowest free placement ----------------------------------------------------------------

THREE = HDR + """.shared .align 4 .u32 sh[8];
.global .align 4 .u32 gout[8];
.visible .entry three()
{
	.reg .b32 %r<4>;
	ld.shared.u32 %r1, [sh];
	ld.shared.u32 %r2, [sh+4];
	ld.shared.u32 %r3, [sh+8];
	st.global.u32 [gout], %r1;
	st.global.u32 [gout+4], %r2;
	st.global.u32 [gout+8], %r3;
	ret;
}
"""


def test_three_live_values_take_r0_r1_r2():
    fn = parse(THREE).functions[0]
    p = problem_of(fn, 15)
    c = color(p)
    assert not c.spilled
    regs = sorted(c.start[p.find(v)] // 2 for v in range(len(fn.regs)))
    assert regs == [0, 1, 2]
    assert check_select(p, c) == 3
    res = allocate(THREE, registers=15, verify=False)
    assert res.functions[0].registers == 3
    assert res.functions[0].spilled_values == 0


@pytest.mark.parametrize("k", [4, 15, 64])
@pytest.mark.parametrize("name", ["hand/loop_backedge.ptx", "hand/diamond.ptx",
                                  "hand/many_preds.ptx", "vectors_sm80.ptx", "misc_sm80.ptx"])
def test_select_takes_lowest_free_placement(name, k):
    module = parse_file(str(DATA / name))
    total = 0
    for fn in module.functions:
        p = problem_of(fn, k)
        c = color(p)
        total += check_select(p, c)
    assert total > 0


def test_actual_spill_only_without_free_placement():
    # five values live at once at K = 4: select must leave at least one without a placement
    text = HDR + """.shared .align 4 .u32 sh[8];
.global .align 4 .u32 gout[8];
.visible .entry five()
{
	.reg .b32 %r<6>;
	ld.shared.u32 %r1, [sh];
	ld.shared.u32 %r2, [sh+4];
	ld.shared.u32 %r3, [sh+8];
	ld.shared.u32 %r4, [sh+12];
	ld.shared.u32 %r5, [sh+16];
	st.global.u32 [gout], %r1;
	st.global.u32 [gout+4], %r2;
	st.global.u32 [gout+8], %r3;
	st.global.u32 [gout+12], %r4;
	st.global.u32 [gout+16], %r5;
	ret;
}
"""
    fn = parse(text).functions[0]
    p = problem_of(fn, 4)
    c = color(p)
    assert len(c.spilled) == 1
    assert c.optimistic >= 1            # a spill candidate was pushed optimistically
    check_select(p, c)


# -- 64-bit values at K = 15 ----------------------------------------------------------------

def test_gpr64_placements_at_k15_are_seven_pairs():
    starts = [s for s, _ in RegFile(15).placements(GPR64)]
    assert starts == [0, 4, 8, 12, 16, 20, 24]         # units: R0:R1 .. R12:R13
    assert RegFile(15).count(GPR32) == 15
    assert [s for s, _ in RegFile(16).placements(GPR64)][-1] == 28     # R14:R15 once K = 16


PAIRS = HDR + """.shared .align 8 .u64 sh64[16];
.global .align 8 .u64 gout[16];
.visible .entry pairs()
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<10>;
	ld.shared.u32 %r1, [sh64+120];
	ld.shared.u64 %rd1, [sh64];
	ld.shared.u64 %rd2, [sh64+8];
	ld.shared.u64 %rd3, [sh64+16];
	ld.shared.u64 %rd4, [sh64+24];
	ld.shared.u64 %rd5, [sh64+32];
	ld.shared.u64 %rd6, [sh64+40];
	ld.shared.u64 %rd7, [sh64+48];
	st.global.u64 [gout], %rd1;
	st.global.u64 [gout+8], %rd2;
	st.global.u64 [gout+16], %rd3;
	st.global.u64 [gout+24], %rd4;
	st.global.u64 [gout+32], %rd5;
	st.global.u64 [gout+40], %rd6;
	st.global.u64 [gout+48], %rd7;
	st.global.u32 [gout+56], %r1;
	ret;
}
"""


def test_seven_pairs_and_one_register_fill_k15_exactly():
    """Seven 64-bit values and one 32-bit value live at once: at K = 15 the pairs must take
    R0:R1 .. R12:R13 and the 32-bit value R14 (a pair at R13:R14 or R14:R15 is impossible)."""
    res = allocate(PAIRS, registers=15, verify=False)
    fr = res.functions[0]
    assert fr.max_live == 15
    assert fr.spilled_values == 0 and fr.registers == 15
    pairs = sorted(int(n) for n in set(re.findall(r"%RD(\d+)", res.ptx)))
    assert pairs == [0, 2, 4, 6, 8, 10, 12]
    assert re.search(r"ld\.shared\.u32\s+%R14,", res.ptx)




@pytest.mark.parametrize("name", [
    "pressure_sm80.ptx", "vectors_sm80.ptx", "hand/many_preds.ptx",
    "calls_sm80.ptx",
    "abi/args64.ptx"])
def test_no_64bit_value_reaches_r14_at_k15(name):
    res = allocate((DATA / name).read_text(), registers=15, verify=False)
    pairs = {int(n) for n in re.findall(r"%RD(\d+)\b", res.ptx)}
    assert pairs, "the file has 64-bit values"
    assert all(n % 2 == 0 and n <= 12 for n in pairs), sorted(pairs)
    for f in res.functions:
        assert f.registers <= 15


# -- register tuples --------------------------------------------------------------------

_VEC = re.compile(r"\{([^{}]*)\}")
_TUPLE_OPS = re.compile(r"^\s*(?:@!?%\w+\s+)?(ld|st|tex|suld|sust|wmma|mma|ldmatrix|tld4)\.")


def tuple_operands(ptx: str):
    for line in ptx.splitlines():
        if not _TUPLE_OPS.match(line) or "//@" in line:
            continue
        for vec in _VEC.findall(line):
            items = [x.strip() for x in vec.split(",")]
            yield line.strip(), items


@pytest.mark.parametrize("k", [15, 32, 255])
@pytest.mark.parametrize("name", ["vectors_sm80.ptx", "tensor_sm80.ptx", "texture_sm80.ptx"])
def test_tuples_are_consecutive_and_aligned(name, k):
    text = (DATA / name).read_text()
    fn_names = [f.name for f in parse(text).functions]
    checked = 0
    for fname in fn_names:
        if k == 15 and "wmma" in fname:
            continue                    # refused at K = 15 (24 registers at once)
        res = allocate(text, registers=k, function=fname, verify=False)
        for line, items in tuple_operands(res.functions[0].text):
            if all(re.fullmatch(r"%R\d+", x) for x in items):
                idx = [int(x[2:]) for x in items]
                if len(set(idx)) == 1 and len(idx) > 1:
                    raise AssertionError(f"repeated register in a tuple: {line}")
                assert idx == list(range(idx[0], idx[0] + len(idx))), line
                align = min(len(idx) if len(idx) & (len(idx) - 1) == 0 else 4, 4)
                assert idx[0] % align == 0, line
                checked += 1
            elif all(re.fullmatch(r"%RD\d+", x) for x in items):
                idx = [int(x[3:]) for x in items]
                assert idx == list(range(idx[0], idx[0] + 2 * len(idx), 2)), line
                assert idx[0] % min(2 * len(idx), 4) == 0, line       # .v2.f64: a 4-aligned quad
                checked += 1
            elif all(re.fullmatch(r"%H\d+", x) for x in items):
                idx = [int(x[2:]) for x in items]
                assert idx == list(range(idx[0], idx[0] + len(idx))), line
                assert idx[0] % len(idx) == 0, line
                checked += 1
    assert checked > 0


def test_v4_tuple_members_get_one_aligned_quad():
    text = HDR + """.global .align 16 .u32 gin[16];
.global .align 4 .u32 gout[16];
.visible .entry v4()
{
	.reg .b32 %r<10>;
	ld.shared.u32 %r9, [gin];
	ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [gin];
	add.u32 %r5, %r1, %r9;
	add.u32 %r6, %r3, %r4;
	add.u32 %r7, %r5, %r6;
	add.u32 %r8, %r7, %r2;
	st.global.u32 [gout], %r8;
	ret;
}
"""
    for k in (6, 15, 255):
        res = allocate(text, registers=k, verify=False)
        m = re.search(r"ld\.global\.v4\.u32\s+\{%R(\d+), %R(\d+), %R(\d+), %R(\d+)\}", res.ptx)
        assert m, res.ptx
        idx = [int(g) for g in m.groups()]
        assert idx[0] % 4 == 0 and idx == list(range(idx[0], idx[0] + 4))
        # %r9 is live across the load: it cannot sit inside the quad
        r9 = re.search(r"ld\.shared\.u32\s+%R(\d+),", res.ptx).group(1)
        assert not idx[0] <= int(r9) <= idx[3]


# -- simplify order and priorities ------------------------------------------------------

def test_stack_holds_every_unfixed_node_once():
    fn = parse_file(str(DATA / "hand" / "loop_backedge.ptx")).functions[0]
    p = problem_of(fn, 3)
    c = color(p)
    assert sorted(c.stack) == sorted(n for n in p.members if n not in p.precolored)
    assert set(c.start) | set(c.spilled) == set(p.members)


def test_cheapest_candidate_is_pushed_optimistically_first():
    """When nothing is trivially colorable, the node pushed is the one with the lowest
    spill_cost / (degree x 0.8): here the value live across everything with one use."""
    text = HDR + """.shared .align 4 .u32 sh[8];
.global .align 4 .u32 gout[8];
.visible .entry clique()
{
	.reg .b32 %r<8>;
	ld.shared.u32 %r1, [sh];
	ld.shared.u32 %r2, [sh+4];
	ld.shared.u32 %r3, [sh+8];
	ld.shared.u32 %r4, [sh+12];
	add.u32 %r5, %r2, %r3;
	add.u32 %r6, %r5, %r4;
	add.u32 %r7, %r6, %r2;
	add.u32 %r7, %r7, %r3;
	add.u32 %r7, %r7, %r4;
	st.global.u32 [gout], %r7;
	st.global.u32 [gout+4], %r1;
	ret;
}
"""
    fn = parse(text).functions[0]
    p = problem_of(fn, 3, do_coalesce=False)
    c = color(p)
    r1 = fn.regs.names.index("%r1")
    ratios = {n: p.cost[n] / max(p.wdeg[n] * 0.8, 1.0) for n in p.members}
    assert min(ratios, key=ratios.get) == r1
    # %r1 is the first node removed without being trivially colorable
    first_blocked = next(n for n in c.stack if p.wdeg[n] >= p.placements[n])
    assert first_blocked == r1


@pytest.mark.parametrize("name,k", [("sm80_matmul.ptx", 255), ("sm80_matmul.ptx", 40),
                                    ("sm80_softmax.ptx", 24)])
def test_dense_degree_updates_color_exactly_like_the_plain_walk(monkeypatch, name, k):
    """The numpy degree updates of dense graphs (``_DenseDegrees``) give the very coloring of
    the plain walk: the same stack, placements, spills and optimistic count, on Triton kernels
    with the density thresholds lowered so that they take the numpy path."""
    import numpy

    import ptxalloc.alloc.briggs as briggs
    fn = parse_file(str(DATA / "triton" / name)).functions[0]
    problem = problem_of(fn, k)
    monkeypatch.setattr(briggs, "_dense_degrees", lambda p, active: None)
    plain = color(problem_of(fn, k))
    monkeypatch.undo()
    monkeypatch.setattr(briggs, "DENSE_NODES", 0)
    monkeypatch.setattr(briggs, "DENSE_DEGREE", 0)
    monkeypatch.setattr(briggs, "numpy_when_worth", lambda work: numpy)
    took = []
    real = briggs._DenseDegrees.lower
    monkeypatch.setattr(briggs._DenseDegrees, "lower",
                        lambda self, n, nb: took.append(n) or real(self, n, nb))
    dense = color(problem)
    assert took
    assert (dense.stack, dense.start, dense.spilled, dense.optimistic) == \
        (plain.stack, plain.start, plain.spilled, plain.optimistic)


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("name,k", [("triton/sm80_matmul.ptx", 40), ("triton/sm80_matmul.ptx", 255),
                                    ("triton/sm80_softmax.ptx", 24), ("calls_sm80.ptx", 24)])
def test_select_gathers_the_units_of_every_colored_neighbour(monkeypatch, name, k, dense):
    """Select finds a node's colored neighbours in the list of neighbours still active when
    simplify removed it, plus the precolored ones (issue 16: no second unpacking of the
    adjacency); the replay, which looks at every colored neighbour, agrees, with the degrees
    updated by the plain walk and by numpy, and with nodes precolored (a placement fixed
    at the start of select, here the first node of each function's problem)."""
    import numpy

    import ptxalloc.alloc.briggs as briggs
    if dense:
        monkeypatch.setattr(briggs, "DENSE_NODES", 0)
        monkeypatch.setattr(briggs, "DENSE_DEGREE", 0)
        monkeypatch.setattr(briggs, "numpy_when_worth", lambda work: numpy)
    checked = 0
    for fn in parse_file(str(DATA / name)).functions:
        p = problem_of(fn, k)
        first = next((n for n in p.members if p.shape[n] == GPR32), None)
        if first is not None:
            p.precolored[first] = 2
        c = color(p)
        assert first is None or first not in c.stack
        checked += check_select(p, c)
    assert checked > 20
