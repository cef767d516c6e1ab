"""The allocation's phases in their own modules (issue 12, item 2): the IR pre-passes of
``ptxalloc.passes``, the largest single-instruction need that both the feasibility check and
``--registers auto`` read (analysis/need.py), the values live across calls computed once per
round (analysis/calls.py), the convention's cost factors taken from target/abi.py, and the saves
around calls inserted by spill/saves.py. Inputs: tests/data/need/guarded_vector_load.ptx
(hand-written, assembled with ``ptxas -arch=sm_80``) and the calling-convention files of
tests/data/abi/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import DATA, assert_verified
from ptxalloc import passes
from ptxalloc.alloc import convention
from ptxalloc.analysis import analyze_function, calls
from ptxalloc.analysis.need import check_feasible, largest_need
from ptxalloc.errors import AllocationError
from ptxalloc.passes.convention import bind_convention
from ptxalloc.pipeline import allocate, auto_budget
from ptxalloc.ptx import parse
from ptxalloc.target import abi, budget
from ptxalloc.target.sm import profile_for_module
from ptxalloc.target.units import RegFile

GUARDED_V4 = DATA / "need" / "guarded_vector_load.ptx"
LIVE_ACROSS = DATA / "abi" / "live_across.ptx"


def _module(path: Path):
    return parse(path.read_text(), str(path))


def test_every_pre_pass_module_is_listed_in_pipeline_order_in_the_package_docstring():
    here = Path(passes.__file__).parent
    modules = sorted(p.stem for p in here.glob("*.py") if p.stem != "__init__")
    listed = re.findall(r":mod:`(\w+)`", passes.__doc__)
    assert sorted(listed) == modules


# -- the largest single-instruction need ------------------------------------------------------

def test_a_guarded_definition_needs_its_old_value_and_its_address_at_once():
    """``@%p1 ld.global.v4`` may keep the four old values: with its address pair that is six
    registers, although no operand list of its own names more than four."""
    fn = _module(GUARDED_V4).functions[0]
    assert largest_need(fn) == 6
    name = fn.regs.names.__getitem__
    check_feasible(fn, RegFile(6), set(), name)
    with pytest.raises(AllocationError, match=r"guarded_vector_load\.ptx:30: function "
                                               r"'guarded_v4': '@%p1 ld\.global\.v4\.u32.*' "
                                               r"needs 6 registers at once"):
        check_feasible(fn, RegFile(5), set(), name)


def test_auto_budget_floor_is_the_need_the_feasibility_check_refuses_below(monkeypatch):
    """``--registers auto`` is given the same floor the allocator refuses below: 6 for the
    guarded vector load (the old count, operand list by operand list, said 4)."""
    module = _module(GUARDED_V4)
    seen = []
    real = budget.choose_budget

    def spy(sm, directives, max_live, pair_penalty, live_count, floor, knobs, limit=None,
            **more):
        seen.append(floor)
        return real(sm, directives, max_live, pair_penalty, live_count, floor, knobs, limit,
                    **more)
    monkeypatch.setattr(budget, "choose_budget", spy)
    chosen = auto_budget(module.functions[0], profile_for_module(None, module))
    assert seen == [6] and chosen.registers >= 6


def test_allocation_at_the_need_succeeds_and_below_it_is_refused():
    text = GUARDED_V4.read_text()
    res = allocate(text, registers=6, filename=str(GUARDED_V4))
    assert res.functions[0].registers <= 6
    assert_verified(res)
    with pytest.raises(AllocationError, match="needs 6 registers at once"):
        allocate(text, registers=5, filename=str(GUARDED_V4))


# -- the calling convention -------------------------------------------------------------------

def test_the_convention_scales_costs_by_the_abi_constants(monkeypatch):
    """Seed 003's factors come from target/abi.py (x2.0 bound to an argument register, x1.5
    live across a call): changed there, the costs follow."""
    assert (abi.ARG_FACTOR, abi.CALLEE_SAVED_FACTOR) == (2.0, 1.5)
    monkeypatch.setattr(convention, "ARG_FACTOR", 7.0)
    monkeypatch.setattr(convention, "CALLEE_SAVED_FACTOR", 5.0)
    module = _module(LIVE_ACROSS)
    sm = profile_for_module(None, module)
    conv = abi.Convention(64)
    ratios = set()
    for fn in module.functions:
        work = fn.copy()
        info = bind_convention(work, conv, [], {v: v for v in range(len(fn.regs))})
        analysis = analyze_function(work, sm)
        before = list(analysis.costs)
        convention.cost_factors(analysis, conv, info)
        ratios |= {round(a / b, 6) for a, b in zip(analysis.costs, before)
                   if b and a != b and a != float("inf")}
    assert ratios and ratios <= {7.0, 5.0, 35.0}
    assert 5.0 in {r for r in ratios} or 35.0 in ratios      # live across a call
    assert 7.0 in ratios or 35.0 in ratios                   # bound to an argument register


def test_values_live_across_calls_are_computed_once_per_round(monkeypatch):
    count = []
    real = calls.live_across_calls

    def counted(cfg, liveness):
        count.append(1)
        return real(cfg, liveness)
    monkeypatch.setattr(calls, "live_across_calls", counted)
    res = allocate(LIVE_ACROSS.read_text(), registers=15, filename=str(LIVE_ACROSS))
    assert_verified(res)
    rounds = sum(f.rounds for f in res.functions)
    assert 1 <= len(count) <= rounds
    assert any(f.report()["convention"]["values_live_across_calls"] for f in res.functions)


# -- the driver's finish step -----------------------------------------------------------------

def test_finish_reuses_the_last_rounds_cfg_when_nothing_changed_the_body(monkeypatch):
    """A leaf kernel that fits its budget: no saves, no spill code, no copy between one
    register; writing it out builds no CFG of its own (the last round's is the function's)."""
    from ptxalloc.alloc import driver
    built = []
    real = driver.CFG

    def counted(fn):
        built.append(fn.name)
        return real(fn)
    monkeypatch.setattr(driver, "CFG", counted)
    path = DATA / "hand" / "diamond.ptx"
    res = allocate(path.read_text(), registers=64, filename=str(path))
    assert_verified(res)
    assert res.functions[0].spill_stores_bytes == 0 and built == []
    # a function with calls gets its saves: the CFG is rebuilt once for the new body
    res = allocate(LIVE_ACROSS.read_text(), registers=15, filename=str(LIVE_ACROSS))
    assert_verified(res)
    assert built
