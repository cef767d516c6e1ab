"""The corpus grade of issue 18 (``bench/grade.py``, :func:`ptxalloc.grade.grade_module`'s
``shortcut``): the shortcut changes no number of the grade, only skips the solver where a
heuristic spills nothing; the bench's summary counts what it should from hand-made rows; the
JSON lines of an interrupted run are read back whole lines only; a function allocated alone
(:func:`ptxalloc.grade.alone`) gets the figures it gets in its whole module; the eviction pass
of ``bench/grade_causes.py`` lies between the optimum and briggs, and its grouping takes the
first change that closes a gap."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("ortools", reason="the optimal allocator needs OR-Tools ('.[optimal]')")

from hypothesis import HealthCheck, given, settings  # noqa: E402

from conftest import DATA, REPO  # noqa: E402
from test_optimal import _brute_force, small_problems  # noqa: E402
from ptxalloc.grade import alone, format_text, grade_module  # noqa: E402
from ptxalloc.pipeline import allocate_module  # noqa: E402
from ptxalloc.ptx import parse_file  # noqa: E402

SAXPY = REPO / "examples" / "saxpy_poly.ptx"


def _bench():
    spec = importlib.util.spec_from_file_location("grade_bench", REPO / "bench" / "grade.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _numbers(row: dict) -> dict:
    return {"optimum": row["optimal"]["spill_cost"],
            **{name: (g["spill_cost"], g["gap"], g["gap_exact"], g["verified"])
               for name, g in row["allocators"].items()}}


@pytest.mark.parametrize("k", [8, 32])
def test_the_shortcut_changes_no_number_of_the_grade(k):
    module = parse_file(str(SAXPY))
    full = grade_module(module, k, time_limit=5)
    short = grade_module(module, k, time_limit=5, shortcut=True)
    assert [_numbers(r) for r in short] == [_numbers(r) for r in full]
    for row in short:
        free = [n for n, g in row["allocators"].items() if g["spill_cost"] == 0]
        # the solver ran exactly where no heuristic spilled nothing
        assert ("reached_by" in row["optimal"]) == bool(free)
        if free:
            assert row["optimal"]["reached_by"] == free[0]
            assert row["optimal"]["solver_seconds"] == 0.0
        else:
            assert row["optimal"]["verified"] is True
    solved = [r for r in short if "reached_by" not in r["optimal"]]
    assert bool(solved) == (k == 8)         # K = 8 has a function that must spill
    text = format_text(short, SAXPY.name)
    assert text.count("no solver needed") == len(short) - len(solved)


def _row(k, optimum, gaps, file="a.ptx", name="f", optimal=True, reached_by=None):
    best = {"spill_cost": optimum, "optimal": optimal, "lower_bound": optimum,
            "solver_seconds": 0.0 if reached_by else 1.5}
    if reached_by:
        best["reached_by"] = reached_by
    return {"file": file, "name": name, "k": k, "optimal": best,
            "allocators": {a: {"spill_cost": None if g is None else optimum * (1 + g / 100)
                               if optimum else (0.0 if g == 0 else 1.0), "gap": g}
                           for a, g in gaps.items()}}


def test_the_summary_counts_solved_functions_gaps_and_names_those_off():
    bench = _bench()
    rows = [_row(15, 10.0, {"briggs": 0.0, "linear": 50.0}, name="f1"),
            _row(15, 10.0, {"briggs": 4.0, "linear": None}, name="f2"),
            _row(15, 0.0, {"briggs": 0.0, "linear": 0.0}, name="f3", reached_by="briggs"),
            _row(15, 8.0, {"briggs": 20.0, "linear": 30.0}, name="f4", optimal=False),
            {"file": "a.ptx", "name": "f5", "k": 15, "optimal": {"refused": "needs 20"},
             "allocators": {}},
            {"file": "b.ptx", "name": "g", "k": 15, "error": "InternalError: boom"}]
    out = "\n".join(bench.summarize(rows, [15]))
    assert "1 function/budget pair(s) raised an error" in out and "b.ptx:g K=15" in out
    assert ("K = 15: 4 functions allocated (1 refused: an instruction needs more), "
            "3 solved to optimality, 1 stopped by the time limit; 1 needed no solver") in out
    # briggs: gaps 0, 4, 0 over the solved: all within 5 %; linear: 50, inf, 0
    assert "briggs    all solved      n=3     median    0.0%" in out
    assert "within 5%: 100.0%" in out
    assert "linear    all solved      n=3 " in out and "within 5%:  33.3%" in out
    assert "(of them unbounded: 1)" in out
    assert "linear more than 5% off at K = 15 (2): a.ptx:f1 (50.0%), a.ptx:f2 (inf%)" in out
    assert "briggs more than 5% off" not in out         # f4's 20 % is only against a bound
    counted = "\n".join(bench.summarize(rows, [15], name_functions=False))
    assert "linear more than 5% off at K = 15 (2)" in counted and "a.ptx:f1" not in counted


def test_interleaving_samples_the_whole_list_first():
    bench = _bench()
    assert bench.interleaved(list(range(8)), 3) == [0, 3, 6, 1, 4, 7, 2, 5]


def test_rows_of_an_interrupted_run_are_read_back_whole(tmp_path):
    bench = _bench()
    path = tmp_path / "rows.jsonl"
    whole = _row(24, 3.0, {"briggs": 0.0})
    path.write_text(json.dumps(whole) + "\n" + json.dumps(whole)[:40])     # cut mid-line
    assert bench.read_rows(str(path)) == [whole]
    assert bench.read_rows(str(tmp_path / "absent.jsonl")) == []


def _figures(res) -> tuple:
    fr, = res.functions
    return (fr.registers, fr.predicates, fr.spill_stores_bytes, fr.spill_loads_bytes, fr.rounds,
            fr.verified)


@pytest.mark.parametrize("path", [SAXPY, DATA / "calls_sm80.ptx"], ids=lambda p: p.name)
def test_a_function_alone_allocates_as_in_its_whole_module(path):
    """grade allocates each function in a module where it is the only definition (callees
    declared); every figure is what the whole module gives, and the text checked is small."""
    module = parse_file(str(path))
    assert len(module.functions) > 1
    for fn in module.functions:
        one = alone(module, fn)
        assert [f.name for f in one.functions] == [fn.name]
        for k, allocator in ((8, "briggs"), (8, "fatpoint"), (24, "linear")):
            whole = allocate_module(module, k, allocator, function=fn.name)
            single = allocate_module(one, k, allocator, function=fn.name)
            assert _figures(single) == _figures(whole)
            assert len(single.ptx) < len(whole.ptx)


def _causes():
    spec = importlib.util.spec_from_file_location("grade_causes", REPO / "bench" / "grade_causes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems())
def test_the_eviction_pass_of_grade_causes_lies_between_the_optimum_and_briggs(p):
    """bench/grade_causes.py's eviction measures what revisiting select's failures would win:
    never more than briggs's own cost, never below the brute-force minimum."""
    from ptxalloc.alloc import briggs

    coloring = briggs.color(p)
    own = sum(p.cost[n] for n in coloring.spilled)
    assert _brute_force(p) - 1e-9 <= _causes().evict(p, coloring) <= own + 1e-9


def test_grade_causes_groups_a_function_by_the_first_change_that_closes_its_gap():
    causes = _causes()
    line = {"opt": 10.0, "briggs": 20.0, "fatpoint": 30.0, "b_nocoal": 20.0, "f_nocoal": 12.0,
            "b_evict": 10.4, "b_nocoal_evict": 10.0, "b_deg2": 10.0, "b_cost": 25.0}
    assert causes.group(line, "briggs").startswith("optimistic select")
    assert causes.group(line, "fatpoint") == "other"
    assert causes.group({**line, "f_nocoal": 10.0}, "fatpoint") == "coalescing"
    assert causes.group({**line, "b_evict": 11.0, "b_deg2": 30.0}, "briggs") == \
        "coalescing and select together"
