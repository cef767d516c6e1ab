"""Conservative coalescing (issue 4, SPEC 4.3): a copy whose ends do not interfere is removed
(``//@removed mov ...`` in the output), ends that interfere are never merged, the Briggs and
the George tests each admit a merge the other refuses, and the 0.8 effective-degree factor
decides a case that the textbook factor 1.0 refuses.

The graphs are built from small hand-written kernels whose only registers are the ones named
(addresses are symbols, so no pointer register adds a neighbour); the comments give each
value's neighbours."""

from __future__ import annotations

import re

import pytest

from ptxalloc.alloc import coalesce as coalesce_mod
from ptxalloc.alloc.coalesce import COALESCE_FACTOR, MAX_COALESCE_ITERATIONS, coalesce
from ptxalloc.alloc.driver import Options
from ptxalloc.alloc.api import Problem
from ptxalloc.analysis import analyze_function
from ptxalloc.pipeline import allocate, allocate_module
from ptxalloc.ptx import parse
from ptxalloc.target.sm import profile_for
from ptxalloc.target.units import RegFile

HDR = (".version 7.0\n.target sm_80\n.address_size 64\n\n"
       ".shared .align 4 .u32 sh[64];\n.global .align 4 .u32 gout[64];\n\n")


def kernel(body: str, name: str = "k", regs: int = 24) -> str:
    return (HDR + f".visible .entry {name}()\n{{\n\t.reg .b32 %r<{regs}>;\n" + body
            + "\tret;\n}\n")


def problem(text: str, k: int) -> tuple[Problem, dict[str, int]]:
    fn = parse(text).functions[0]
    an = analyze_function(fn, profile_for(None, "sm_80"))
    ids = {n: i for i, n in enumerate(fn.regs.names)}
    return Problem.from_analysis(an, RegFile(k)), ids


def merged(p: Problem, a: int, b: int) -> bool:
    return p.find(a) == p.find(b)


def body_of(ptx: str, name: str) -> str:
    start = ptx.index(f" {name}(")
    return ptx[start:ptx.index("\n}", start)]


# -- a copy whose ends do not interfere ---------------------------------------------------

SIMPLE = kernel("""\
\tld.shared.u32 %r1, [sh];
\tmov.u32 %r2, %r1;
\tadd.u32 %r3, %r2, 1;
\tst.global.u32 [gout], %r3;
""")


def test_copy_without_interference_is_coalesced():
    p, v = problem(SIMPLE, 15)
    assert not p.interferes(v["%r1"], v["%r2"])
    stats = coalesce(p)
    assert merged(p, v["%r1"], v["%r2"])
    assert stats.moves == 1 and stats.coalesced == 1


def test_coalesced_copy_is_removed_from_the_output():
    res = allocate(SIMPLE, registers=15, verify=False)
    body = body_of(res.ptx, "k")
    removed = re.findall(r"//@removed (mov\.u32\s+(%R\d+), (%R\d+);)", body)
    assert len(removed) == 1, body
    _, dst, src = removed[0]
    assert dst == src
    # the copy is gone from the instructions: no live mov.u32 line remains
    assert not re.search(r"^\s*mov\.u32", body, re.M)
    fr = res.functions[0]
    assert fr.moves == 1 and fr.moves_coalesced == 1


# -- interfering ends --------------------------------------------------------------------

INTERFERING = kernel("""\
\tld.shared.u32 %r1, [sh];
\tmov.u32 %r2, %r1;
\tadd.u32 %r1, %r1, 1;
\tadd.u32 %r3, %r1, %r2;
\tst.global.u32 [gout], %r3;
""")


def test_interfering_ends_are_not_merged():
    # %r1 is redefined while the copy %r2 is live: the two interfere
    p, v = problem(INTERFERING, 15)
    assert p.interferes(v["%r1"], v["%r2"])
    for factor in (0.8, 1.0, 0.1):
        p, v = problem(INTERFERING, 15)
        stats = coalesce(p, factor)
        assert not merged(p, v["%r1"], v["%r2"])
        assert stats.coalesced == 0 and stats.constrained == 1


def test_interfering_copy_stays_in_the_output():
    res = allocate(INTERFERING, registers=15, verify=False)
    body = body_of(res.ptx, "k")
    assert "//@removed" not in body
    m = re.search(r"^\s*mov\.u32\s+(%R\d+), (%R\d+);", body, re.M)
    assert m and m.group(1) != m.group(2), body
    assert res.functions[0].moves_coalesced == 0


def test_copy_between_b32_and_f32_registers_is_merged():
    # .b32 and .f32 registers are one class (GPR32): a mov between them is a coalescable copy
    text = kernel("""\
\tld.shared.u32 %r1, [sh];
\tmov.b32 %f1, %r1;
\tadd.f32 %f2, %f1, 0f3F800000;
\tst.global.f32 [gout], %f2;
""").replace("\t.reg .b32 %r<24>;\n", "\t.reg .b32 %r<24>;\n\t.reg .f32 %f<4>;\n")
    p, v = problem(text, 15)
    coalesce(p)
    assert merged(p, v["%r1"], v["%f1"])


# -- Briggs only, George only, and the 0.8 factor -----------------------------------------
#
# K = 3. FACTOR_CASE: the copy %r9 <- %r8 (%r8 dies at the copy).
#   n1 = %r2: neighbours f=%r1, n2=%r3, a=%r8          degree 3
#   n2 = %r3: neighbours f, n1, a                      degree 3
#   n3 = %r10: neighbours b=%r9, h1=%r11, h2=%r12      degree 3
#   a = %r8: n1, n2; b = %r9: n3  -> the merged node has three neighbours of degree 3.
# With factor 1.0 each is significant (3 x 1.0 >= 3): Briggs counts 3 >= K and fails; George
# fails both ways (n1 is not a neighbour of b, n3 not of a). With 0.8 (3 x 0.8 < 3) none is
# significant and the merge goes through.

FACTOR_CASE = kernel("""\
\tld.shared.u32 %r1, [sh];
\tld.shared.u32 %r2, [sh+4];
\tld.shared.u32 %r3, [sh+8];
\tst.global.u32 [gout], %r1;
\tld.shared.u32 %r8, [sh+12];
\tst.global.u32 [gout+4], %r2;
\tst.global.u32 [gout+8], %r3;
\tmov.u32 %r9, %r8;
\tld.shared.u32 %r10, [sh+16];
\tst.global.u32 [gout+12], %r9;
\tld.shared.u32 %r11, [sh+20];
\tld.shared.u32 %r12, [sh+24];
\tst.global.u32 [gout+16], %r10;
\tst.global.u32 [gout+20], %r11;
\tst.global.u32 [gout+24], %r12;
""")


def test_factor_case_graph_is_as_designed():
    p, v = problem(FACTOR_CASE, 3)
    deg = {n: p.wdeg[v[n]] for n in ("%r2", "%r3", "%r10")}
    assert deg == {"%r2": 3, "%r3": 3, "%r10": 3}
    assert not p.interferes(v["%r8"], v["%r9"])
    assert {n for n in ("%r2", "%r3", "%r10") if p.interferes(v[n], v["%r8"])} == {"%r2", "%r3"}
    assert {n for n in ("%r2", "%r3", "%r10") if p.interferes(v[n], v["%r9"])} == {"%r10"}


def test_default_factor_is_the_seeds():
    assert COALESCE_FACTOR == 0.8
    assert MAX_COALESCE_ITERATIONS == 10
    assert Options().coalesce_factor == 0.8


def test_factor_08_coalesces_what_10_refuses():
    p, v = problem(FACTOR_CASE, 3)
    a, b = v["%r9"], v["%r8"]
    assert not coalesce_mod._briggs(p, a, b, 1.0)
    assert not coalesce_mod._george(p, a, b, 1.0) and not coalesce_mod._george(p, b, a, 1.0)
    coalesce(p, 1.0)
    assert not merged(p, a, b)
    p, v = problem(FACTOR_CASE, 3)
    assert coalesce_mod._briggs(p, a, b, 0.8)
    coalesce(p, 0.8)
    assert merged(p, a, b)


def test_factor_reaches_the_allocation_through_options():
    """``Options(coalesce_factor=...)`` is what the rounds use: the move is merged in the
    problem (and the copy removed) with 0.8, and with 1.0 it is not merged."""
    module = parse(FACTOR_CASE)
    seen = {}
    real = coalesce_mod.coalesce

    def spy(p, factor=COALESCE_FACTOR, max_rounds=MAX_COALESCE_ITERATIONS):
        stats = real(p, factor, max_rounds)
        seen.setdefault(factor, stats.coalesced)
        return stats

    import ptxalloc.alloc.driver as driver
    orig = driver.coalesce
    driver.coalesce = spy
    try:
        r08 = allocate_module(module, 3, verify=False, options=Options(coalesce_factor=0.8))
        r10 = allocate_module(module, 3, verify=False, options=Options(coalesce_factor=1.0))
    finally:
        driver.coalesce = orig
    assert seen == {0.8: 1, 1.0: 0}
    assert "//@removed mov.u32" in r08.ptx
    assert r08.functions[0].moves_coalesced == 1
    for r in (r08, r10):
        assert r.functions[0].registers <= 3


# K = 3, factor 1.0 (significant: degree >= 3). BRIGGS_ONLY: like FACTOR_CASE but n2 = %r3
# has degree 2 (no f neighbour): the merged node has 2 significant neighbours (n1, n3) < K, so
# Briggs passes, while George fails both ways.

BRIGGS_ONLY = kernel("""\
\tld.shared.u32 %r1, [sh];
\tld.shared.u32 %r2, [sh+4];
\tst.global.u32 [gout], %r1;
\tld.shared.u32 %r3, [sh+8];
\tld.shared.u32 %r8, [sh+12];
\tst.global.u32 [gout+4], %r2;
\tst.global.u32 [gout+8], %r3;
\tmov.u32 %r9, %r8;
\tld.shared.u32 %r10, [sh+16];
\tst.global.u32 [gout+12], %r9;
\tld.shared.u32 %r11, [sh+20];
\tld.shared.u32 %r12, [sh+24];
\tst.global.u32 [gout+16], %r10;
\tst.global.u32 [gout+20], %r11;
\tst.global.u32 [gout+24], %r12;
""")


def test_briggs_admits_what_george_refuses():
    p, v = problem(BRIGGS_ONLY, 3)
    assert p.wdeg[v["%r2"]] == 3 and p.wdeg[v["%r3"]] == 2 and p.wdeg[v["%r10"]] == 3
    a, b = v["%r9"], v["%r8"]
    assert coalesce_mod._briggs(p, a, b, 1.0)
    assert not coalesce_mod._george(p, a, b, 1.0)
    assert not coalesce_mod._george(p, b, a, 1.0)
    coalesce(p, 1.0)
    assert merged(p, a, b)


# K = 2, factor 0.8 (significant: degree x 0.8 >= 2, i.e. degree >= 3). GEORGE_ONLY: %r1..%r4
# and the copy's two ends are all live together at the end (a = %r5 is copied into b = %r6
# right after its definition and both stay live): every neighbour of a is a neighbour of b
# (George passes), but the merged node has four significant neighbours >= K (Briggs fails).

GEORGE_ONLY = kernel("""\
\tld.shared.u32 %r1, [sh];
\tld.shared.u32 %r2, [sh+4];
\tld.shared.u32 %r3, [sh+8];
\tld.shared.u32 %r4, [sh+12];
\tld.shared.u32 %r5, [sh+16];
\tmov.u32 %r6, %r5;
\tst.global.u32 [gout], %r1;
\tst.global.u32 [gout+4], %r2;
\tst.global.u32 [gout+8], %r3;
\tst.global.u32 [gout+12], %r4;
\tst.global.u32 [gout+16], %r5;
\tst.global.u32 [gout+20], %r6;
""")


def test_george_admits_what_briggs_refuses():
    p, v = problem(GEORGE_ONLY, 2)
    a, b = v["%r6"], v["%r5"]
    assert not p.interferes(a, b)
    assert not coalesce_mod._briggs(p, a, b, 0.8)
    assert coalesce_mod._george(p, a, b, 0.8) or coalesce_mod._george(p, b, a, 0.8)
    coalesce(p, 0.8)
    assert merged(p, a, b)


def test_merge_keeps_the_graph_consistent():
    """After coalescing, adjacency is symmetric over the surviving nodes, a merged node's
    neighbours are the union of its members' neighbours, and weighted degrees are recounted."""
    p, v = problem(FACTOR_CASE, 3)
    coalesce(p, 0.8)
    nodes = set(p.members)
    for n in nodes:
        for m in nodes:
            if m != n:
                assert p.interferes(n, m) == p.interferes(m, n)
        assert p.wdeg[n] == p.weighted_degree(n)
    ab = p.find(v["%r8"])
    for x in ("%r2", "%r3", "%r10"):
        assert p.interferes(ab, v[x])


def test_coalescing_chain_of_copies_reaches_a_fixpoint():
    # %r1 -> %r2 -> %r3 -> %r4: every copy's ends become one node
    text = kernel("""\
\tld.shared.u32 %r1, [sh];
\tmov.u32 %r2, %r1;
\tmov.u32 %r3, %r2;
\tmov.u32 %r4, %r3;
\tst.global.u32 [gout], %r4;
""")
    p, v = problem(text, 15)
    stats = coalesce(p)
    assert stats.coalesced == 3
    assert len({p.find(v[n]) for n in ("%r1", "%r2", "%r3", "%r4")}) == 1
    res = allocate(text, registers=15, verify=False)
    assert res.ptx.count("//@removed mov.u32") == 3
    assert res.functions[0].registers == 1


def test_project_data_moves_are_counted(tmp_path):
    """On real nvcc output with copies (vectors_sm80's k_warp has mov.b32 of shuffled values)
    every reported coalesced move is a //@removed copy in the output."""
    from conftest import DATA
    text = (DATA / "vectors_sm80.ptx").read_text()
    res = allocate(text, registers=255, verify=False)
    removed = res.ptx.count("//@removed mov")
    assert removed == sum(f.moves_coalesced for f in res.functions)
    for f in res.functions:
        assert 0 <= f.moves_coalesced <= f.moves


@pytest.mark.parametrize("name", ["tensor_sm80", "texture_sm80", "vectors_sm80", "vectors_sm90"])
@pytest.mark.parametrize("k", [24, 64])
def test_weighted_degrees_stay_exact_through_merges(name, k, monkeypatch):
    """After the driver's coalescing (scalars merged into tuples, 64-bit pairs), every node's
    kept weighted degree is the one recomputed from scratch: a neighbour shared with the node
    that disappeared loses that node's weight, not the survivor's."""
    from conftest import DATA
    from ptxalloc.alloc import driver
    merges = []

    def checked(p, *args, **kw):
        before = len(p.members)
        got = coalesce(p, *args, **kw)
        merges.append(before - len(p.members))
        wrong = [n for n in p.members if p.wdeg[n] != p.weighted_degree(n)]
        assert not wrong, (wrong[:5], [(p.wdeg[n], p.weighted_degree(n)) for n in wrong[:5]])
        return got
    monkeypatch.setattr(driver, "coalesce", checked)
    # in the order written: at K = 24 the scheduled vectors files leave coalescing no merge
    allocate_module(parse((DATA / f"{name}.ptx").read_text()), k, verify=False,
                    options=Options(knobs={"schedule": 0}))
    assert sum(merges) > 0


def test_scalar_merges_into_a_tuple_member():
    """A copy out of a vector load's member (the member dead after it) merges the scalar into
    the tuple, on that member's units: the copy disappears and the scalar is the member's
    register."""
    text = kernel("\tld.shared.v4.u32 {%r1, %r2, %r3, %r4}, [sh];\n"
                  "\tmov.u32 %r5, %r3;\n"
                  "\tadd.u32 %r6, %r1, %r2;\n"
                  "\tadd.u32 %r6, %r6, %r4;\n"
                  "\tmul.lo.u32 %r7, %r5, %r6;\n"
                  "\tst.global.u32 [gout], %r7;\n")
    res = allocate(text, registers=15)
    fr = res.functions[0]
    assert fr.verified and fr.moves == 1 and fr.moves_coalesced == 1
    ld = re.search(r"ld\.shared\.v4\.u32\s+\{(%R\d+), (%R\d+), (%R\d+), (%R\d+)\}", res.ptx)
    mul = re.search(r"mul\.lo\.u32\s+%R\d+, (%R\d+),", res.ptx)
    assert ld and mul and mul.group(1) == ld.group(3)



def _real_problems():
    """(name, K, analysis) of the functions of some test inputs, at budgets that spill and
    that do not."""
    from conftest import DATA
    for name in ("locals_G_sm80.ptx", "texture_sm80.ptx", "vectors_sm80.ptx",
                 "hand/optimal_claim_copies.ptx", "hand/brx.ptx", "hand/hoist_loop.ptx",
                 "triton/sm80_softmax.ptx", "triton/sm80_matmul.ptx"):
        module = parse((DATA / name).read_text())
        for fn in module.functions:
            an = analyze_function(fn, profile_for(None, "sm_80"))
            for k in (16, 32, 255):
                yield f"{name}:{fn.name}@{k}", k, an


def test_briggs_weight_bound_decides_as_the_walk(monkeypatch):
    """Briggs's test (plain and into a tuple) answers yes at once when the neighbours' weights
    cannot reach the limit even if all were significant (issue 16: most copies of a large
    function); coalescing and the merges into tuples (:mod:`tuple_reuse`) then merge exactly
    what the walk over the neighbours merges, on real functions at three budgets."""
    from ptxalloc.alloc.tuple_reuse import affinities, reuse_tuple_units

    def run(an, k):
        p = Problem.from_analysis(an, RegFile(k))
        stats = coalesce(p)
        reused = reuse_tuple_units(p, affinities(an))
        return p.parent, p.offset, p.merges, stats.coalesced, reused

    real_bits = coalesce_mod.bits
    walked = {"bound": 0, "walk": 0}       # neighbour sets unpacked, with and without it
    for label, k, an in _real_problems():
        for way in ("bound", "walk"):
            if way == "walk":
                monkeypatch.setattr(coalesce_mod, "_weight_bound", lambda p, shape, nbrs: None)

            def counting(x, way=way):
                walked[way] += 1
                return real_bits(x)
            monkeypatch.setattr(coalesce_mod, "bits", counting)
            got = run(an, k)
            if way == "bound":
                fast = got
            else:
                assert got == fast, label
            monkeypatch.undo()
    assert walked["bound"] < walked["walk"] / 2


def test_problem_copy_is_a_fresh_problem():
    """:meth:`Problem.copy` (the driver colors one round's problem up to three times) gives
    what building the problem again gives, and coalescing the copy leaves the original as
    built."""
    for label, k, an in _real_problems():
        regfile = RegFile(k)
        built = Problem.from_analysis(an, regfile)
        copy = built.copy()
        assert vars(copy) == vars(Problem.from_analysis(an, regfile)), label
        merged = coalesce(copy).coalesced
        assert vars(built) == vars(Problem.from_analysis(an, regfile)), label
        assert not merged or vars(copy) != vars(built)


@pytest.mark.parametrize("name", ["tensor_sm80.ptx", "vectors_sm90.ptx",
                                  "triton/sm80_matmul.ptx", "triton/attn_fwd_tma_64x64_d64.ptx"])
def test_node_adjacency_is_the_members_interference(name):
    """A node interferes with every node one of whose registers interferes with one of its own
    (register tuples are one node; the tuples' side is found from the tuple, issue 16): the
    adjacency of the problem as built, against that definition register by register."""
    from conftest import DATA
    from ptxalloc.util import bits

    module = parse((DATA / name).read_text())
    tuples = 0
    for fn in module.functions:
        an = analyze_function(fn, profile_for(None, module.sm))
        p = Problem.from_analysis(an, RegFile(255))
        tuples += sum(p.is_group)
        for leader, members in p.members.items():
            want = set()
            for v in members:
                want |= {p.find(y) for y in bits(p.reg_adj[v])}
            want -= {leader} | set(p.pinned)
            assert set(bits(p.adj[leader])) == want, (fn.name, leader)
    assert tuples


@pytest.mark.parametrize("name", ["triton/attn_fwd_tma_64x64_d64.ptx", "tensor_sm80.ptx",
                                  "vectors_sm90.ptx"])
def test_a_new_problems_weighted_degrees_are_counted_shape_by_shape(name):
    """The degrees a problem starts with (issue 16: each shape's terms found once, the most
    common shape's weight counted for all neighbours in one popcount) are those
    ``weighted_degree`` counts node by node, on inputs with 16-, 32-, 64- and 128-bit values,
    predicates and mma tuples."""
    from conftest import DATA
    from ptxalloc.target.sm import profile_for
    from ptxalloc.target.units import RegFile
    checked = 0
    for fn in parse((DATA / name).read_text()).functions:
        for k in (24, 255):
            p = Problem.from_analysis(analyze_function(fn, profile_for(None, "sm_90")),
                                      RegFile(k))
            assert len(p.shape_masks) >= 2
            assert p.wdeg == {n: p.weighted_degree(n) for n in p.members}
            checked += len(p.members)
    assert checked > 100
