"""Issue 16: what only allocators (or only reports) read is computed on first use."""

from __future__ import annotations


import ptxalloc.analysis as analysis
from conftest import DATA
from ptxalloc.analysis import analyze_function
from ptxalloc.ptx import parse_file
from ptxalloc.target.sm import profile_for


def test_costs_on_first_use_equal_the_eager_ones(monkeypatch):
    fn = parse_file(str(DATA / "loops_sm80.ptx")).functions[1]
    sm = profile_for("sm_80")
    a = analyze_function(fn, sm, remat={3: 0.5}, no_spill={1})
    calls = []
    real = analysis.cost_terms
    monkeypatch.setattr(analysis, "cost_terms", lambda *x: calls.append(x) or real(*x))
    first = a.costs
    assert a.costs is first and len(calls) == 1
    assert first == analysis.spill_costs(a.cfg, a.liveness, a.mem_latency, {3: 0.5}, {1})


def test_costs_with_rematerialization_reuse_the_terms(monkeypatch):
    """``analyze`` wants costs with and without rematerialization: the frequencies and loop
    multipliers are found once, and each set of costs equals a computation from scratch."""
    from ptxalloc.analysis.explain_peak import remat_and_costs

    fn = parse_file(str(DATA / "loops_sm80.ptx")).functions[1]
    a = analyze_function(fn, profile_for("sm_80"))
    calls = []
    real = analysis.cost_terms
    monkeypatch.setattr(analysis, "cost_terms", lambda *x: calls.append(x) or real(*x))
    remat, with_remat, plain = remat_and_costs(a)
    assert remat, "the test wants a function with rematerializable values"
    assert a.costs == analysis.spill_costs(a.cfg, a.liveness, a.mem_latency)
    from ptxalloc.spill.remat import COMPUTE_COST
    assert with_remat == analysis.spill_costs(a.cfg, a.liveness, a.mem_latency,
                                              {v: COMPUTE_COST for v in remat})
    assert with_remat != a.costs and plain is a.costs and len(calls) == 1


def test_report_costs_of_some_values_equal_the_full_costs():
    """``analyze`` computes the costs of the values it shows only (a bitset): those equal
    the costs computed for every register, with and without rematerialization."""
    from ptxalloc.analysis.explain_peak import remat_and_costs

    fn = parse_file(str(DATA / "loops_sm80.ptx")).functions[1]
    a = analyze_function(fn, profile_for("sm_80"))
    remat, with_remat, plain = remat_and_costs(a)
    picked = range(0, len(fn.regs), 3)
    some_remat, some_with, some_plain = remat_and_costs(a, sum(1 << v for v in picked))
    assert some_remat == remat
    assert some_with == {v: with_remat[v] for v in picked}
    assert some_plain == {v: plain[v] for v in picked}


def test_pressure_by_class_on_first_use_sums_to_gpr():
    fn = parse_file(str(DATA / "pressure_sm80.ptx")).functions[0]
    p = analyze_function(fn, profile_for("sm_80")).pressure
    assert p._by_class is None
    split = p.by_class
    assert [sum(col) for col in zip(*split.values())] == p.gpr
    assert p.by_class is split


def test_instruction_base_is_the_opcode_without_modifiers():
    fn = parse_file(str(DATA / "tensor_sm80.ptx")).functions[0]
    for ins in fn.instructions():
        assert ins.base == ins.opcode.split(".", 1)[0]
