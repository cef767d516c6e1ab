"""Seed 001's allocation flags ("Compiler Flags"): each is parsed, reaches what it controls and
changes the result — ``--regalloc``, ``--spill-limit``, ``--verify-regalloc``,
``--print-regalloc-stats``, ``--occupancy-target``, ``--pressure-limit``,
``--coalescing-factor`` — on the shipped example and the project's own PTX."""

from __future__ import annotations

import json

import pytest

from conftest import DATA, REPO
from ptxalloc.cli import main
from ptxalloc.target.budget import choose_budget
from ptxalloc.alloc.knobs import resolve
from ptxalloc.target.occupancy import occupancy
from ptxalloc.target.sm import PROFILES

SAXPY = REPO / "examples" / "saxpy_poly.ptx"
MATMUL = DATA / "explain" / "triton_matmul_sm80.ptx"


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def report(capsys, *argv) -> list[dict]:
    rc, out, err = run(capsys, "allocate", *argv, "-o", "/dev/null", "--json", "-")
    assert rc == 0, err
    return json.loads(out)["functions"]


def test_regalloc_is_the_allocator(capsys):
    rows = report(capsys, SAXPY, "--regalloc=fatpoint", "--registers", "16")
    assert {r["allocator"] for r in rows} == {"fatpoint"}
    assert "fatpoint_attempts" in rows[0]
    with pytest.raises(SystemExit) as e:
        main(["allocate", str(SAXPY), "--regalloc=nosuch"])
    assert e.value.code == 2 and "--allocator/--regalloc: invalid choice" in \
        capsys.readouterr().err


def test_spill_limit_names_the_function(capsys):
    rows = report(capsys, SAXPY, "--registers", "12")
    spilled = {r["name"]: r["spilled_values"] for r in rows}
    worst = max(spilled, key=spilled.get)
    assert spilled[worst] > 0
    # the limit at what the allocation spills passes; one less is refused, naming it
    assert report(capsys, SAXPY, "--registers", "12", "--spill-limit", spilled[worst])
    rc, out, err = run(capsys, "allocate", SAXPY, "--registers", "12", "--spill-limit",
                       spilled[worst] - 1, "-o", "/dev/null")
    assert rc == 2 and f"'{worst}'" in err and "--spill-limit" in err and "Traceback" not in err
    rc, _, err = run(capsys, "allocate", SAXPY, "--spill-limit", "-1", "-o", "/dev/null")
    assert rc == 2 and "--spill-limit must be" in err


def test_verify_regalloc_is_the_default_and_excludes_no_verify(capsys):
    assert {r["verified"] for r in report(capsys, SAXPY, "--verify-regalloc")} == {True}
    assert {r["verified"] for r in report(capsys, SAXPY)} == {True}
    assert {r["verified"] for r in report(capsys, SAXPY, "--no-verify")} == {None}
    with pytest.raises(SystemExit):
        main(["allocate", str(SAXPY), "--verify-regalloc", "--no-verify"])
    capsys.readouterr()


def test_print_regalloc_stats(capsys):
    rc, out, err = run(capsys, "allocate", SAXPY, "--registers", "12", "-o", "/dev/null",
                       "--print-regalloc-stats")
    assert rc == 0, err
    assert out.count("ptxalloc stats: ") == 2
    assert "interference" in out and "density" in out and "spill rate" in out
    assert "time per phase: legalize" in out and "verify" in out
    rows = report(capsys, SAXPY, "--registers", "12", "--print-regalloc-stats")
    for r in rows:
        s = r["regalloc_stats"]
        assert s["nodes"] > 0 and s["edges"] > 0 and 0 < s["density"] <= 1
        assert s["max_degree"] >= s["avg_degree"] > 0
        assert s["rounds"] == r["rounds"] and s["moves_coalesced"] == r["moves_coalesced"]
        assert s["spill_rate"] == pytest.approx(r["spilled_values"] / s["nodes"], abs=1e-6)
        assert set(s["seconds"]) >= {"legalize", "analysis", "color", "output", "verify"}
    # without the flag there are no statistics (and no graph is built for them)
    assert all("regalloc_stats" not in r and "graph" not in r for r in report(capsys, SAXPY))


def test_occupancy_target_sets_the_auto_budget(capsys):
    sm = PROFILES["sm_80"]
    for pct in (25, 50, 100):
        rows = report(capsys, MATMUL, "--registers", "auto", "--allocator", "fatpoint",
                      "--occupancy-target", pct)
        (r,) = rows
        k = r["budget"]
        assert occupancy(sm, k, 128).fraction * 100 >= pct
        assert occupancy(sm, k + 1, 128).fraction * 100 < pct or k == 255
        assert f"occupancy target {pct} %" in r["budget_reason"]
        assert r["registers"] <= k
    rc, _, err = run(capsys, "allocate", SAXPY, "--occupancy-target", "50", "-o", "/dev/null")
    assert rc == 0 and "--occupancy-target has no effect" in err
    rc, _, err = run(capsys, "allocate", SAXPY, "--registers", "auto", "--occupancy-target",
                     "101", "-o", "/dev/null")
    assert rc == 2 and "--occupancy-target must be a number from 0 to 100" in err


def test_occupancy_target_out_of_reach_stops_at_the_floor():
    sm = PROFILES["sm_80"]
    b = choose_budget(sm, {"reqntid": [1024]}, 200, 0, 0, 40, resolve({}),
                      occupancy_target=100)
    assert b.registers == 40 and "out of reach" in b.reason


def test_pressure_limit_is_the_budget_models_threshold(capsys, monkeypatch):
    # the model's pressure breakpoint: MaxLive 140 (sm_80, 256 threads) stays at 168
    # registers with the default 160, and steps down to 128 when spilling turns aggressive
    # from a pressure of 120
    sm = PROFILES["sm_80"]
    assert choose_budget(sm, {}, 140, 0, 0, 1, resolve({})).registers == 168
    assert choose_budget(sm, {}, 140, 0, 0, 1,
                         resolve({"RegTgtPressureThreshold": 120})).registers == 128
    # the flag is that knob, on its way from the command line to the model
    seen = []
    import ptxalloc.target.budget as budget
    real = budget.choose_budget

    def spy(*args, **kw):
        seen.append(args[6]["RegTgtPressureThreshold"])
        return real(*args, **kw)
    monkeypatch.setattr(budget, "choose_budget", spy)
    report(capsys, SAXPY, "--registers", "auto", "--pressure-limit", "120")
    assert seen == [120, 120]
    rc, _, err = run(capsys, "allocate", SAXPY, "--pressure-limit", "120", "--knob",
                     "RegTgtPressureThreshold=100", "-o", "/dev/null")
    assert rc == 2 and "give one" in err
    rc, _, err = run(capsys, "allocate", SAXPY, "--pressure-limit", "100", "-o", "/dev/null")
    assert rc == 0 and "RegTgtPressureThreshold has no effect" in err


def test_coalescing_factor_reaches_coalescing(capsys, monkeypatch):
    import ptxalloc.alloc.driver as driver
    seen = []
    real = driver.coalesce

    def spy(p, factor, *rest):
        seen.append(factor)
        return real(p, factor, *rest)
    monkeypatch.setattr(driver, "coalesce", spy)
    report(capsys, SAXPY, "--registers", "12", "--coalescing-factor", "0.5")
    assert seen and set(seen) == {0.5}
    seen.clear()
    report(capsys, SAXPY, "--registers", "12")
    assert set(seen) == {0.8}
    rc, _, err = run(capsys, "allocate", SAXPY, "--allocator", "linear",
                     "--coalescing-factor", "1", "-o", "/dev/null")
    assert rc == 0 and "does not coalesce" in err
    rc, _, err = run(capsys, "allocate", SAXPY, "--coalescing-factor", "x", "-o", "/dev/null")
    assert rc == 2 and "--coalescing-factor must be" in err
