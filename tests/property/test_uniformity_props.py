"""Property tests of the uniformity analysis (issue 17, :mod:`ptxalloc.analysis.uniformity`),
on random kernels with branches and loops written as PTX text and parsed:

(a) a divergent source never makes a value uniform: in kernels whose registers are all defined
    before any branch, replacing one source operand by ``%tid.x``
    leaves the uniform set the same or smaller (monotonicity; the analysis is a greatest
    fixpoint that only removes registers);
(b) the datapath rule finds a subset of the value rule, and either finds only candidates;
(c) every allocation with uniform registers of such a kernel is proven by the checker, whose
    own uniformity check agrees;
(d) the divergent blocks are exactly the union of every divergent branch's region, as a
    breadth-first search per branch finds it (it caught one walk cutting another's short).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxalloc.analysis.uniformity import DATAPATH_RULE, VALUE_RULE, uniform_registers
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse

REGS = [f"%r{i}" for i in range(1, 7)]
SOURCES = REGS + ["%ctaid.x", "%tid.x", "%ntid.x", "7", "%n"]
LABELS = ["$L0", "$L1", "$L2"]


@st.composite
def programs(draw):
    """A list of statements: ("op", dst, a, b), ("br", a, b, label), ("label", name)."""
    stmts = [("op", r, "%n", str(i)) for i, r in enumerate(REGS)]      # everything defined
    body = draw(st.lists(st.one_of(
        st.tuples(st.just("op"), st.sampled_from(REGS), st.sampled_from(SOURCES),
                  st.sampled_from(SOURCES)),
        st.tuples(st.just("br"), st.sampled_from(SOURCES), st.sampled_from(SOURCES),
                  st.sampled_from(LABELS)),
        st.tuples(st.just("label"), st.sampled_from(LABELS))), min_size=1, max_size=14))
    placed = set()
    for s in body:
        if s[0] == "label":
            if s[1] in placed:
                continue
            placed.add(s[1])
        stmts.append(s)
    for lab in LABELS:
        if lab not in placed:
            stmts.append(("label", lab))
    return stmts


def text(stmts) -> str:
    lines = ["\tld.param.u32 %n, [k_n];"]
    for k, s in enumerate(stmts):
        if s[0] == "op":
            lines.append(f"\tadd.s32 {s[1]}, {s[2]}, {s[3]};")
        elif s[0] == "br":
            lines.append(f"\tsetp.lt.s32 %p{k}, {s[1]}, {s[2]};")
            lines.append(f"\t@%p{k} bra {s[3]};")
        else:
            lines.append(f"{s[1]}:")
    lines.append("\tld.param.u64 %rd1, [k_p];")
    lines += [f"\tst.global.u32 [%rd1+{4 * i}], {r};" for i, r in enumerate(REGS)]
    lines.append("\tret;")
    return (".version 8.0\n.target sm_80\n.address_size 64\n\n"
            ".visible .entry k(.param .u64 k_p, .param .u32 k_n)\n{\n"
            "\t.reg .pred %p<64>;\n\t.reg .b32 %r<8>;\n\t.reg .b32 %n;\n\t.reg .b64 %rd<2>;\n"
            + "\n".join(lines) + "\n}\n")


def uniform(src: str, rule=VALUE_RULE) -> set[str]:
    fn = parse(src, "k.ptx").functions[0]
    u = uniform_registers(fn, rule=rule)
    return {fn.regs.names[v] for v in range(len(fn.regs)) if u >> v & 1}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_a_divergent_source_never_makes_a_value_uniform(stmts, data):
    spots = [(k, j) for k, s in enumerate(stmts) if s[0] != "label"
             for j in ((2, 3) if s[0] == "op" else (1, 2))]
    k, j = data.draw(st.sampled_from(spots))
    s = list(stmts[k])
    s[j] = "%tid.x"
    changed = stmts[:k] + [tuple(s)] + stmts[k + 1:]
    assert uniform(text(changed)) <= uniform(text(stmts))


@settings(max_examples=100, deadline=None)
@given(programs())
def test_datapath_rule_is_a_subset_of_the_value_rule(stmts):
    src = text(stmts)
    fn = parse(src, "k.ptx").functions[0]
    value = uniform_registers(fn, rule=VALUE_RULE)
    datapath = uniform_registers(fn, rule=DATAPATH_RULE)
    assert datapath & ~value == 0
    some = value & 0b1010101010101
    assert uniform_registers(fn, rule=VALUE_RULE, candidates=some) & ~some == 0


@settings(max_examples=40, deadline=None)
@given(programs())
def test_uniform_allocations_of_random_kernels_are_proven(stmts):
    res = allocate(text(stmts), uniform=True, filename="k.ptx")
    assert {f.verified for f in res.functions} == {True}


def _region_oracle(cfg, ipdom, b: int) -> set[int]:
    """Blocks reachable from a successor of ``b`` in the graph without ``ipdom[b]``, one
    breadth-first search per successor (written apart from the analysis's walk)."""
    stop = ipdom[b]
    out: set[int] = set()
    for s in cfg.blocks[b].succs:
        if s == stop:
            continue
        seen = {s}
        frontier = [s]
        while frontier:
            nxt = []
            for x in frontier:
                for y in cfg.blocks[x].succs:
                    if y != stop and y not in seen:
                        seen.add(y)
                        nxt.append(y)
            frontier = nxt
        out |= seen
    return out


@settings(max_examples=150, deadline=None)
@given(programs())
def test_divergent_blocks_are_the_union_of_every_divergent_branchs_region(stmts):
    from ptxalloc.analysis.uniformity import divergent_blocks, immediate_postdominators
    from ptxalloc.ir.cfg import CFG
    fn = parse(text(stmts), "k.ptx").functions[0]
    cfg = CFG(fn)
    uniform = uniform_registers(fn, cfg)
    ipdom = immediate_postdominators(cfg)
    want: set[int] = set()
    for b in cfg.blocks:
        if len(b.succs) > 1 and b.reachable and not uniform >> b.instrs[-1].guard & 1:
            if not any(cfg.blocks[s].instrs and cfg.blocks[s].instrs[0].opcode == "ret"
                       for s in b.succs):
                want |= _region_oracle(cfg, ipdom, b.id)
    got = divergent_blocks(cfg, uniform, ipdom)
    assert {x for x in range(len(cfg.blocks)) if got >> x & 1} == want
