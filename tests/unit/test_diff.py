"""``ptxalloc diff`` (issue 14, "Compare two builds"): per-function changes, Mesa-style totals,
the ``--fail-on`` gate, PTX and JSON inputs — on nvcc output shipped in tests/data/diff (two
builds of acc.cu, the second keeping more accumulators live) and on the shipped Triton PTX."""

from __future__ import annotations

import json

import pytest

from conftest import DATA
from ptxalloc.cli import main
from ptxalloc.errors import UsageError
from ptxalloc.report.diff import parse_thresholds

OLD = DATA / "diff" / "acc16_sm90.ptx"
NEW = DATA / "diff" / "acc24_sm90.ptx"
TRITON = DATA / "explain" / "triton_matmul_sm80.ptx"
ACC = "_Z5k_accPfPKfS1_i"


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def allocate_report(capsys, tmp_path, path, *options) -> tuple[str, dict]:
    rep = tmp_path / f"{path.stem}{'_'.join(options)}.json"
    rc, _, err = run(capsys, "allocate", path, "-o", "/dev/null", "--json", rep, *options)
    assert rc == 0, err
    return str(rep), json.loads(rep.read_text())


def test_more_pressure_trips_registers_plus_zero(capsys):
    rc, out, err = run(capsys, "diff", OLD, NEW, "--fail-on", "registers=+0")
    assert rc == 1
    assert f"ptxalloc: diff: {ACC}: registers " in err and "trips registers=+0" in err
    assert "Totals from 1 affected function: registers " in out
    # less pressure, the same file, or a looser threshold: the gate stays open
    assert run(capsys, "diff", NEW, OLD, "--fail-on", "registers=+0")[0] == 0
    rc, out, _ = run(capsys, "diff", OLD, OLD, "--fail-on", "registers=+0,spill-bytes=+0")
    assert rc == 0 and "No affected functions." in out
    assert run(capsys, "diff", OLD, NEW, "--fail-on", "registers=+100")[0] == 0


def test_figures_and_totals_match_the_allocations(capsys, tmp_path):
    _, old = allocate_report(capsys, tmp_path, OLD, "--registers", "20")
    _, new = allocate_report(capsys, tmp_path, NEW, "--registers", "20")
    o = {r["name"]: r for r in old["functions"]}[ACC]
    n = {r["name"]: r for r in new["functions"]}[ACC]
    so = o["spill_stores_bytes"] + o["spill_loads_bytes"]
    sn = n["spill_stores_bytes"] + n["spill_loads_bytes"]
    # more accumulators, the same budget: more spill traffic (K = 20: both builds spill, so
    # the percentage in the totals is defined)
    assert sn > so > 0
    rc, out, err = run(capsys, "diff", OLD, NEW, "--registers", "20", "--json",
                       "--fail-on", "spill-bytes=+0,occupancy=-1")
    assert rc == 1
    d = json.loads(out)
    assert d["schema"] == "ptxalloc/diff/1" and d["new"] == {"file": str(NEW), "arch": "sm_90"}
    (row,) = [r for r in d["functions"] if r["affected"]]
    assert row["name"] == ACC
    assert row["old"]["spill_bytes"] == so and row["new"]["spill_bytes"] == sn
    assert row["change"]["max_live"] == n["max_live"]["registers"] - o["max_live"]["registers"]
    assert d["totals"]["affected"] == 1 and d["totals"]["compared"] == 2
    assert d["tripped"] == [f"{ACC}: spill bytes {so} -> {sn} trips spill-bytes=+0"]
    rc, out, _ = run(capsys, "diff", OLD, NEW, "--registers", "20")
    assert rc == 0          # no --fail-on: nothing gates
    assert (f"Totals from 1 affected function: spill bytes {so} -> {sn} "
            f"({100 * (sn - so) / so:+.2f} %)") in out.splitlines()


def test_json_reports_and_ptx_give_the_same_diff(capsys, tmp_path):
    old_json, _ = allocate_report(capsys, tmp_path, OLD)
    new_json, _ = allocate_report(capsys, tmp_path, NEW)
    rc1, from_ptx, _ = run(capsys, "diff", OLD, NEW, "--json")
    rc2, from_json, _ = run(capsys, "diff", old_json, new_json, "--json")
    rc3, mixed, _ = run(capsys, "diff", old_json, NEW, "--json")
    assert rc1 == rc2 == rc3 == 0
    a, b, c = (json.loads(x) for x in (from_ptx, from_json, mixed))
    assert a["functions"] == b["functions"] == c["functions"]
    assert a["totals"] == b["totals"]


def test_triton_kernel_at_two_budgets(capsys, tmp_path):
    roomy, r = allocate_report(capsys, tmp_path, TRITON, "--registers", "255")
    tight, t = allocate_report(capsys, tmp_path, TRITON, "--registers", "64")
    (r,), (t,) = r["functions"], t["functions"]
    before = r["spill_stores_bytes"] + r["spill_loads_bytes"]
    after = t["spill_stores_bytes"] + t["spill_loads_bytes"]
    assert after > before      # MaxLive is above both budgets: the tighter one spills more
    rc, out, err = run(capsys, "diff", roomy, tight, "--fail-on", "spill-bytes=+0")
    assert rc == 1 and f"matmul_kernel: spill bytes {before} -> {after} trips" in err
    assert (f"Totals from 1 affected function: spill bytes {before} -> {after} "
            f"({100 * (after - before) / before:+.2f} %)") in out.splitlines()
    rc, out, err = run(capsys, "diff", tight, roomy, "--fail-on", "spill-bytes=+0,registers=+0%")
    assert rc == 1 and "registers 64 -> 255 trips registers=+0%" in err and "spill" not in err


@pytest.mark.parametrize("text,trips", [
    ("registers=+2", [(10, 12, False), (10, 13, True), (13, 10, False)]),
    ("occupancy=-1", [(50, 49, False), (50, 37.5, True), (50, 100, False)]),
    ("spill-bytes=+10%", [(100, 110, False), (100, 111, True), (0, 4, True), (0, 0, False)]),
    ("max-live=-0", [(30, 29, True), (30, 30, False)]),
])
def test_threshold_grammar(text, trips):
    (t,) = parse_thresholds(text)
    assert [t.trips(o, n) for o, n, _ in trips] == [want for *_, want in trips]


@pytest.mark.parametrize("text", ["registers=2", "registers+2", "regs=+2", "occupancy=-x",
                                  "registers=+2,", "spill-bytes=+-1"])
def test_bad_thresholds_are_usage_errors(capsys, text):
    with pytest.raises(UsageError):
        parse_thresholds(text)
    rc, out, err = run(capsys, "diff", OLD, NEW, "--fail-on", text)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--fail-on" in err


def test_a_report_of_another_command_is_refused(capsys, tmp_path):
    p = tmp_path / "analyze.json"
    assert main(["analyze", str(OLD), "--json"]) == 0
    p.write_text(capsys.readouterr().out)
    rc, out, err = run(capsys, "diff", p, NEW)
    assert rc == 2 and "not a ptxalloc allocate report" in err and err.count("\n") == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    rc, out, err = run(capsys, "diff", bad, NEW)
    assert rc == 2 and f"{bad}:1:3: not a JSON report" in err
