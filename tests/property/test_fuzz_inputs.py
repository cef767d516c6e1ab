"""Mutated real PTX through ``ptxalloc allocate`` in process (issue 11): the CI-sized run of the
input fuzzer whose full form is ``bench/fuzz_inputs.py`` (same operators,
``tests/fuzz_mutations.py``; ptxas as the oracle there, none needed here).

Every operator makes a few mutants of a handful of small real inputs (nvcc output and
hand-written PTX from tests/data); each goes through ``ptxalloc.cli.main`` with its output
captured and a per-mutant time cap (``signal.alarm``, so a hang fails instead of stalling CI).
Whatever the mutant, ptxalloc must: return (no exception escapes ``main``), not report an
internal error (exit 3), not fail its own proof (exit 1), answer a refusal with one line
``ptxalloc: ...``, and verify every function of an allocation it writes (exit 0).

For the operators that keep a program's meaning (statements joined on a line, the module
minified, whitespace and comments between tokens: ``fuzz_mutations.MEANING_PRESERVING``),
ptxalloc must also allocate the mutant exactly as it allocates the source: exit 0 and the same
functions (before the token parser, a directive followed by more PTX on its line lost the
rest of the line: a minified module allocated no function and exited 0).
"""

from __future__ import annotations

import json
import signal
import sys
from functools import lru_cache

import pytest

import fuzz_mutations as fm
from conftest import DATA, corpus_root
from ptxalloc.cli import main

INPUTS = ["hand/diamond.ptx", "hand/scopes.ptx", "hand/brx.ptx", "abi/fib.ptx",
          "misc_sm80.ptx", "calls_sm80.ptx", "vectors_sm80.ptx"]
MUTANTS_PER_OPERATOR = 4
SEED = 11
TIME_CAP_S = 30


@lru_cache(maxsize=1)
def sources() -> list[tuple[str, str]]:
    return [(name, fm.read_ptx(DATA / name)) for name in INPUTS]


def mutant(operator: str, index: int) -> fm.Mutant:
    return fm.make_mutant(SEED, index, sources(), [operator])


def budget_and_allocator(index: int) -> tuple[int, str]:
    return (255 if index % 4 == 3 else 15), ("briggs", "fatpoint")[index % 2]


class TimeCap(BaseException):
    """Raised by the alarm; a BaseException so that main's internal-error handler (which catches
    Exception) lets it through."""


def _alarm(signum, frame):
    raise TimeCap(f"a mutant ran past {TIME_CAP_S} s")


def allocate(path, out_dir, budget: int, allocator: str, capsys) -> tuple[int, str, list]:
    """``ptxalloc allocate`` in process under the time cap: (exit, stderr, report rows)."""
    out, report = out_dir / "out.ptx", out_dir / "report.json"
    report.unlink(missing_ok=True)
    capsys.readouterr()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_CAP_S)
    try:
        rc = main(["allocate", str(path), "--registers", str(budget), "--allocator", allocator,
                   "-o", str(out), "--json", str(report)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    err = capsys.readouterr().err
    rows = json.loads(report.read_text())["functions"] if rc == 0 else []
    return rc, err, rows


def check_outcome(rc: int, err: str, rows: list, what: str) -> None:
    assert rc != 3, f"internal error on {what}: {err}"
    assert rc != 1, f"allocation failed its own proof on {what}: {err}"
    assert rc in (0, 2), f"exit {rc} on {what}: {err}"
    assert "Traceback" not in err, err
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ptxalloc: "), err
    else:
        assert {row["verified"] for row in rows} <= {True}, (what, rows)


def write(tmp_path, m: fm.Mutant):
    path = tmp_path / f"{m.operator}_{m.index}.ptx"
    path.write_bytes(fm.to_bytes(m.text))
    return path


CASES = [pytest.param(op, i, id=f"{op}-{i}")
         for op in fm.OPERATORS for i in range(MUTANTS_PER_OPERATOR)]


@pytest.mark.parametrize("operator,index", CASES)
def test_mutant_is_allocated_or_refused_cleanly(operator, index, tmp_path, capsys):
    m = mutant(operator, index)
    budget, allocator = budget_and_allocator(index)
    rc, err, rows = allocate(write(tmp_path, m), tmp_path, budget, allocator, capsys)
    check_outcome(rc, err, rows, f"{operator} of {m.source} (K = {budget}, {allocator})")


@pytest.mark.parametrize("operator,index", [
    pytest.param(op, i, id=f"{op}-{i}") for op in fm.MEANING_PRESERVING for i in range(6)])
def test_meaning_preserving_mutant_allocates_like_its_source(operator, index, tmp_path, capsys):
    m = fm.make_mutant(SEED + 1, index, sources(), [operator])
    budget, allocator = budget_and_allocator(index)
    src_path = tmp_path / "source.ptx"
    src_path.write_bytes(fm.to_bytes(dict(sources())[m.source]))
    rc0, err0, rows0 = allocate(src_path, tmp_path, budget, allocator, capsys)
    assert rc0 == 0, err0
    rc, err, rows = allocate(write(tmp_path, m), tmp_path, budget, allocator, capsys)
    what = f"{operator} of {m.source} (K = {budget}, {allocator})"
    check_outcome(rc, err, rows, what)
    assert rc == 0, f"{what}: refused a program that means what its source means: {err}"
    assert sorted(r["name"] for r in rows) == sorted(r["name"] for r in rows0), what


def test_time_cap_stops_a_runaway_allocation(tmp_path, capsys, monkeypatch):
    """The cap is real: an allocation made to sleep past it raises TimeCap."""
    import time

    import ptxalloc.pipeline as pipeline

    monkeypatch.setattr(sys.modules[__name__], "TIME_CAP_S", 1)
    real = pipeline.allocate_module

    def slow(*args, **kwargs):
        time.sleep(5)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "allocate_module", slow)
    with pytest.raises(TimeCap):
        allocate(DATA / "hand" / "diamond.ptx", tmp_path, 15, "briggs", capsys)


@pytest.mark.corpus
def test_function_missing_its_closing_brace_is_refused_quickly(tmp_path, capsys, monkeypatch):
    """The hang the fuzzer found (delete_close_brace of thrust/bfs.ptx): the first function's
    '}' deleted. ptxas refuses the file at once; ptxalloc must refuse it too, within 5 s."""
    root = corpus_root()
    if root is None:
        pytest.skip("../shared/corpus is absent")
    text = fm.read_ptx(root / "gpuocelot/tests/ptx/thrust/bfs.ptx")
    brace = text.index("} // _ZN7phalanx9any_placeC1Ev")
    path = tmp_path / "bfs_unclosed.ptx"
    path.write_bytes(fm.to_bytes(text[:brace] + text[brace + 1:]))
    monkeypatch.setattr(sys.modules[__name__], "TIME_CAP_S", 5)
    rc, err, rows = allocate(path, tmp_path, 15, "briggs", capsys)
    check_outcome(rc, err, rows, "bfs.ptx without its first function's '}'")
    assert rc == 2, err
