"""The goals report of ``bench/whole_process.py`` (issue 16) from hand-made rows: each goal of
a set printed beside ptxas's figure, a measured cause under every goal not met and none under a
goal met, and the growth slope read off log CPU against log lines."""

from __future__ import annotations

import importlib.util
import math
import sys

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec = importlib.util.spec_from_file_location("whole_process",
                                                      REPO / "bench" / "whole_process.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO / "bench"))


def _row(name: str, lines: int, ptxas: float, allocate: float, source="zluda", **extra) -> dict:
    return {"source": source, "file": f"/c/{name}", "lines": lines, "ptxas": ptxas,
            "allocate": allocate, "allocate_ratio": allocate / ptxas, **extra}


FIXED = {"allocate": 0.040, "ptxas": 0.008}


@pytest.mark.parametrize("power", [1.0, 1.5, 2.0])
def test_growth_slope_is_the_power_of_lines(bench, power):
    rows = [_row(f"f{n}", n, 1.0, FIXED["allocate"] + 1e-6 * n ** power)
            for n in (1000, 3000, 10000, 40000)]
    slope, fitted = bench.growth_slope(rows, "allocate", FIXED["allocate"])
    assert fitted == 4
    assert slope == pytest.approx(power, abs=1e-9)


def test_growth_slope_needs_three_files_of_a_thousand_lines(bench):
    rows = [_row("a", 2000, 1.0, 0.5), _row("b", 500, 1.0, 0.5), _row("c", 4000, 1.0, 0.9)]
    slope, fitted = bench.growth_slope(rows, "allocate", FIXED["allocate"])
    assert fitted == 2 and math.isnan(slope)


def test_growth_is_fitted_over_the_same_files_for_both(bench, capsys):
    """A file at or under ptxas's fixed cost leaves both fits, not only ptxas's."""
    members = [_row(f"f{n}", n, 0.02 * n / 1000, 0.1 * (n / 1000) ** 2)
               for n in (1000, 2000, 4000, 8000)]
    members.append(_row("tiny-for-ptxas", 3000, FIXED["ptxas"], 0.9))
    bench.print_group_goals("corpus", members, members, FIXED, None, None)
    out = capsys.readouterr().out
    assert "over the 4 files >= 1,000 lines" in out
    assert "cause: ptxas's own time grows with slope" in out


def test_every_goal_not_met_has_its_cause(bench, capsys):
    members = [_row("small1", 30, 0.010, 0.050), _row("small2", 40, 0.012, 0.060),
               _row("big", 20000, 0.200, 1.600),
               _row("renderer.ptx", 143000, 1.0, 9.0, analyze=0.9, analyze_ratio=0.9,
                    parse=0.45)]
    batch = {"cpu": 10.0, "wall": 10.0, "exit": 0, "ptxas": 1.222, "jobs": 1}
    causes = bench.print_group_goals("corpus", members, members, FIXED, batch, None)
    out = capsys.readouterr().out
    assert "allocate median <= 1.0x: 5.00x  NOT met" in out
    assert "fixed cost alone (a one-instruction kernel) is 40.0 ms" in out
    assert "where ptxas >= 50 ms: 0/2 files" in out
    assert "analyze <= 0.5x ptxas on renderer.ptx: 0.90 s / 1.00 s = 0.90x  NOT met" in out
    assert "`ptxalloc parse` of it alone takes 0.45 s = 0.45x ptxas" in out
    assert "batch <= 0.5x the sum of ptxas: 10.0 s / 1.2 s = 8.18x  NOT met" in out
    assert "the batch's own cost beyond it -0.6 s" in out
    assert "these files' own work (allocate less the fixed cost) a median 10.0 ms" in out
    assert set(causes) == {"median", "analyze", "batch"}   # no phase profile without a python
    assert out.count("NOT met") == out.count("cause:") + 1  # the heavy goal: profile skipped


def test_goals_met_print_no_cause(bench, capsys):
    members = [_row("a", 100, 0.050, 0.040), _row("b", 2000, 0.100, 0.080),
               _row("c", 8000, 0.400, 0.300)]
    batch = {"cpu": 0.2, "wall": 0.2, "exit": 0, "ptxas": 0.55, "jobs": 1}
    causes = bench.print_group_goals("triton", members, members, FIXED, batch, ("python", {}))
    out = capsys.readouterr().out
    assert "the Triton set (3 files)" in out
    assert "NOT met" not in out and "cause:" not in out
    assert causes == {}
