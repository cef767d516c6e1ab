"""``ptxalloc batch`` (issue 16): per-function JSON lines, resume, Ctrl-C leaves whole lines."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import DATA, REPO
from ptxalloc.batch import BatchOptions, completed_files, run_batch
from ptxalloc.cli import main
from ptxalloc.ptx import parse_file

GOOD = [DATA / "hand" / "diamond.ptx", DATA / "calls_sm80.ptx", DATA / "loops_sm80.ptx"]


@pytest.fixture
def inputs(tmp_path):
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    for i, p in enumerate(GOOD):
        shutil.copy(p, (d / "sub" if i == 2 else d) / p.name)
    (d / "bad.ptx").write_text(".version 8.0\n.target sm_80\n.entry k( {\n")
    (d / "notes.txt").write_text("not PTX\n")
    return d


def records(path) -> list[dict]:
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def check_whole(path, expect_files: set[str]) -> None:
    """Every line is JSON; each file closed exactly once, after its functions' lines."""
    recs = records(path)
    closed = [r["file"] for r in recs if r.get("complete")]
    assert sorted(closed) == sorted(expect_files)
    for r in recs:
        if not r.get("complete"):
            assert r["file"] in expect_files and r["function"]
    for f in expect_files:
        if f.endswith("bad.ptx"):
            continue
        names = [r["function"] for r in recs if r["file"] == f and not r.get("complete")]
        assert names == [fn.name for fn in parse_file(f).functions]


@pytest.mark.parametrize("jobs", [1, 2])
def test_batch_writes_a_line_per_function_and_closes_each_file(inputs, tmp_path, capsys,
                                                               jobs):
    out = tmp_path / "r.jsonl"
    rc = main(["batch", str(inputs), "--out", str(out), "--jobs", str(jobs)])
    stdout, _ = capsys.readouterr()
    assert rc == 0
    files = {str(inputs / "diamond.ptx"), str(inputs / "calls_sm80.ptx"),
             str(inputs / "sub" / "loops_sm80.ptx"), str(inputs / "bad.ptx")}
    check_whole(out, files)
    recs = records(out)
    bad = [r for r in recs if r["file"].endswith("bad.ptx")]
    assert len(bad) == 1 and bad[0]["error"].startswith(f"{inputs / 'bad.ptx'}:")
    rows = [r for r in recs if not r.get("complete")]
    assert all(r["verified"] and r["registers"] <= r["budget"] for r in rows)
    assert "failed                     1" in stdout and "processed                  4" in stdout


def test_batch_analyze_allocates_nothing(inputs, tmp_path, monkeypatch):
    import ptxalloc.alloc.driver as driver
    monkeypatch.setattr(driver, "allocate_function", lambda *a, **k: 1 / 0)
    out = tmp_path / "a.jsonl"
    run_batch([str(inputs / "calls_sm80.ptx")], str(out), BatchOptions(analyze=True))
    rows = [r for r in records(out) if not r.get("complete")]
    assert rows and all("max_live" in r and "interference" in r for r in rows)


def test_batch_resumes_skipping_complete_files(inputs, tmp_path):
    out = tmp_path / "r.jsonl"
    first = run_batch([str(inputs / "diamond.ptx")], str(out), BatchOptions())
    assert (first.files, first.skipped) == (1, 0)
    before = out.read_text()
    again = run_batch([str(inputs)], str(out), BatchOptions())
    assert (again.files, again.skipped) == (4, 1)
    assert out.read_text().startswith(before)
    check_whole(out, {str(inputs / "diamond.ptx"), str(inputs / "calls_sm80.ptx"),
                      str(inputs / "sub" / "loops_sm80.ptx"), str(inputs / "bad.ptx")})


def test_resume_drops_a_torn_line_and_unclosed_files(inputs, tmp_path):
    out = tmp_path / "r.jsonl"
    run_batch([str(inputs / "diamond.ptx")], str(out), BatchOptions())
    whole = out.read_text()
    unclosed = json.dumps({"file": str(inputs / "calls_sm80.ptx"), "function": "x"})
    out.write_text(whole + unclosed + "\n" + '{"file": "torn')
    assert completed_files(str(out)) == {str(inputs / "diamond.ptx")}
    assert out.read_text() == whole


def test_keyboard_interrupt_leaves_complete_lines_and_resume_finishes(inputs, tmp_path):
    out = tmp_path / "r.jsonl"
    seen = []

    def interrupt_after_first(_line):
        seen.append(_line)
        if len(seen) == 1:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_batch([str(inputs)], str(out), BatchOptions(), progress=interrupt_after_first)
    recs = records(out)                     # every line whole JSON
    assert len([r for r in recs if r.get("complete")]) == 1
    rest = run_batch([str(inputs)], str(out), BatchOptions(), progress=lambda s: None)
    assert rest.skipped == 1
    check_whole(out, {str(inputs / "diamond.ptx"), str(inputs / "calls_sm80.ptx"),
                      str(inputs / "sub" / "loops_sm80.ptx"), str(inputs / "bad.ptx")})


def test_ctrl_c_on_the_command_exits_130_with_whole_lines(tmp_path):
    """A real SIGINT to ``ptxalloc batch`` running a pool: exit 130, every line whole."""
    d = tmp_path / "many"
    d.mkdir()
    for i in range(40):
        shutil.copy(DATA / "loops_sm80.ptx", d / f"f{i:02}.ptx")
    out = tmp_path / "r.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "ptxalloc", "batch", str(d), "--out",
                             str(out), "--jobs", "2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not (out.exists() and out.stat().st_size > 0):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the batch finished before the interrupt arrived")
    assert proc.returncode == 130, err
    assert "ptxalloc: interrupted" in err and "Traceback" not in err
    recs = records(out)
    closed = {r["file"] for r in recs if r.get("complete")}
    assert closed and len(closed) < 40
    assert all(r["file"] in closed for r in recs)


def test_unusable_out_is_a_one_line_error(inputs, tmp_path, capsys):
    for out, fragment in ((tmp_path, "cannot write"), (inputs / "diamond.ptx", "input file"),
                          ("-", "--out must name a file")):
        rc = main(["batch", str(inputs), "--out", str(out)])
        _, err = capsys.readouterr()
        assert rc == 2 and err.count("\n") == 1 and fragment in err, err
    assert (inputs / "diamond.ptx").read_text() == (GOOD[0]).read_text()


def test_dask_batch_writes_the_same_lines_and_resumes(inputs, tmp_path, capsys):
    """``--dask ADDRESS`` on a LocalCluster: the same records as the local pool (bar the
    CPU seconds), and a second run skips every complete file."""
    distributed = pytest.importorskip("distributed")
    local = tmp_path / "local.jsonl"
    run_batch([str(inputs)], str(local), BatchOptions(), jobs=1)
    out = tmp_path / "dask.jsonl"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                  dashboard_address=None) as cluster:
        run_batch([str(inputs / "diamond.ptx")], str(out), BatchOptions(),
                  dask=cluster.scheduler_address)
        rc = main(["batch", str(inputs), "--out", str(out), "--dask",
                   cluster.scheduler_address])
    stdout, _ = capsys.readouterr()
    assert rc == 0 and "already complete (skipped) 1" in stdout
    files = {str(inputs / "diamond.ptx"), str(inputs / "calls_sm80.ptx"),
             str(inputs / "sub" / "loops_sm80.ptx"), str(inputs / "bad.ptx")}
    check_whole(out, files)

    def by_file(path):
        got = {}
        for r in records(path):
            r.pop("seconds", None)
            got.setdefault(r["file"], []).append(r)
        return got
    assert by_file(out) == by_file(local)


def test_dask_interrupt_cancels_and_leaves_complete_lines(inputs, tmp_path):
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "r.jsonl"
    seen = []

    def interrupt_after_first(_line):
        seen.append(_line)
        if len(seen) == 1:
            raise KeyboardInterrupt
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        with pytest.raises(KeyboardInterrupt):
            run_batch([str(inputs)], str(out), BatchOptions(), progress=interrupt_after_first,
                      dask=cluster.scheduler_address)
    recs = records(out)
    assert len([r for r in recs if r.get("complete")]) == 1
    rest = run_batch([str(inputs)], str(out), BatchOptions(), progress=lambda s: None)
    assert rest.skipped == 1


def test_dask_unreachable_scheduler_is_a_one_line_error(inputs, tmp_path, capsys):
    pytest.importorskip("distributed")
    rc = main(["batch", str(inputs / "diamond.ptx"), "--out", str(tmp_path / "r.jsonl"),
               "--dask", "tcp://127.0.0.1:1"])
    _, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") == 1 and "cannot reach the scheduler" in err, err


def test_dask_without_the_extra_is_a_one_line_error(inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)     # import fails as if absent
    rc = main(["batch", str(inputs / "diamond.ptx"), "--out", str(tmp_path / "r.jsonl"),
               "--dask", "tcp://127.0.0.1:8786"])
    _, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") == 1 and "pip install 'ptxalloc[dask]'" in err, err
