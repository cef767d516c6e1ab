"""Corpus conformance of the allocator (issues 4 and 7): every function of every corpus file
ptxas accepts allocates at K = 15 and K = 255 — at K = 15 a function may instead be refused
with an AllocationError that names an instruction needing more than 15 registers at once
(SPEC section 2: some budgets are impossible; there are only a handful) — within the budget,
and the allocated module assembles with ptxas for the manifest's ``ptxas_arch``. The
call-heavy files (issue 7) are allocated at K = 15, 32 and 255, assembled and proven by the
checker, and so is every other file that makes a call (at the same three budgets). The last
test prints the counts: refusals, spill bytes, convention saves, moves
coalesced, how often K = 255 reaches MaxLive.

Skipped where ``../shared/corpus`` is absent. The work for each file (allocation at every
budget and ptxas) runs in a pool of worker processes, a few files ahead of the test that
checks it, so that the whole file takes a few minutes on two cores.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from conftest import (assert_justified_refusal, corpus_files, corpus_params, corpus_root,
                      manifest)
from ptxalloc.errors import VerificationError

BUDGETS = (15, 255)
CALL_HEAVY = ("gpuocelot/tests/ptx/unstructured/complex.ptx",
              "ptx90parser/tests/sample/matrix_free_device_matrix_vector_01.1.sm_80.ptx")
CALL_BUDGETS = (15, 32, 255)
_CALL = re.compile(r"^\s*(?:@!?%\w+\s+)?call(?:\.uni)?\b", re.M)
#: "a handful": at most this many functions of the whole corpus may be refused at K = 15
#: (11 today: wmma.mma needing 24 registers, wgmma accumulators of 32 and 128)
MAX_REFUSED = 12
#: files submitted to the workers ahead of the one being checked
WINDOW = 6


_SPILL_CODE = re.compile(r"//@(?:spill|reload) ")
_R31 = re.compile(r"%R31\b|%RD30\b|%RQ28\b")


# -- the work, in a worker process --------------------------------------------------------

def _work(rel: str, arch: str, budgets: tuple[int, ...], verify: bool) -> dict:
    """Allocate one corpus file at each budget, assemble each result, optionally verify it;
    returns plain data for the test to check."""
    from ptxalloc import ptxas
    from ptxalloc.pipeline import allocate_what_fits
    from ptxalloc.ptx import parse_file

    t0 = time.perf_counter()
    module = parse_file(str(corpus_root() / rel))
    out: dict = {"budgets": {}}
    for k in budgets:
        got: dict = {"error": None, "refused": {}, "rows": [], "r31": [], "ptxas": None,
                     "verify_error": None}
        out["budgets"][k] = got
        try:
            res, kept, refused = allocate_what_fits(module, k, verify=False)
        except Exception as e:                          # noqa: BLE001 - reported by the test
            got["error"] = f"{type(e).__name__}: {e}"
            continue
        got["refused"] = refused
        for fr in res.functions:
            row = fr.report()
            row.pop("seconds", None)
            row["spill_code"] = bool(_SPILL_CODE.search(fr.text))
            got["rows"].append(row)
            if k > 31 and "convention" in row and _R31.search(fr.text):
                got["r31"].append(fr.name)
        if ptxas.available():
            a = ptxas.assemble(res.ptx, arch)
            got["ptxas"] = (a.ok, a.output[:3000])
        if verify:
            from ptxalloc.verify import verify_module_text
            try:
                verify_module_text(kept, res.ptx, res.functions)
            except VerificationError as e:
                got["verify_error"] = str(e)
            got["verified"] = [fr.verified for fr in res.functions]
    out["seconds"] = time.perf_counter() - t0
    return out


# -- scheduling -----------------------------------------------------------------------------

_POOL: ProcessPoolExecutor | None = None
_FUTURES: dict = {}


_CALL_FILES: list[str] | None = None


def call_files() -> list[str]:
    """The corpus files ptxas accepts that make a call: the call-heavy ones first, then every
    other file with a ``call`` instruction (issue 7: K = 15, 32 and 255, verified)."""
    global _CALL_FILES
    if _CALL_FILES is None:
        root = corpus_root()
        paths = [e["path"] for e in corpus_files()]
        others = [] if root is None else [
            p for p in paths if p not in CALL_HEAVY
            and _CALL.search((root / p).read_text(errors="replace"))]
        _CALL_FILES = [p for p in CALL_HEAVY if p in paths] + others
    return _CALL_FILES


def _jobs() -> list[tuple[str, str, tuple[int, ...], bool]]:
    """Every job, in the order the tests run."""
    calls = set(call_files())
    jobs = [(e["path"], e["ptxas_arch"], BUDGETS, False) for e in corpus_files()
            if e["path"] not in calls]
    entries = {e["path"]: e for e in manifest()}
    for rel in call_files():
        jobs.append((rel, entries[rel]["ptxas_arch"], CALL_BUDGETS, True))
    return jobs


def _result(rel: str, budgets: tuple[int, ...]) -> dict:
    global _POOL
    jobs = _jobs()
    keys = [(j[0], j[2]) for j in jobs]
    i = keys.index((rel, budgets))
    if _POOL is None:
        ctx = multiprocessing.get_context("fork")
        _POOL = ProcessPoolExecutor(max_workers=max(2, os.cpu_count() or 2), mp_context=ctx)
    for job in jobs[i:i + WINDOW]:
        key = (job[0], job[2])
        if key not in _FUTURES:
            _FUTURES[key] = _POOL.submit(_work, *job)
    return _FUTURES[(rel, budgets)].result()


STATS: dict = {"files": 0, "seconds": 0.0, "refused": [],
               "calls": {k: 0 for k in CALL_BUDGETS}, "across": {k: 0 for k in CALL_BUDGETS},
               **{k: {"functions": 0, "spill_bytes": 0, "save_bytes": 0, "moves": 0,
                      "coalesced": 0, "at_max_live": 0} for k in (15, 32, 255)}}


def _count(k: int, rows: list[dict]) -> None:
    s = STATS[k]
    for r in rows:
        s["functions"] += 1
        s["spill_bytes"] += r["spill_stores_bytes"] + r["spill_loads_bytes"]
        s["save_bytes"] += r.get("convention", {}).get("save_restore_bytes", 0)
        s["moves"] += r["moves"]
        s["coalesced"] += r["moves_coalesced"]
        # at or below: values written into a register tuple's dead members (TupleReuse) can
        # use fewer registers than MaxLive, which counts a tuple whole while any member lives
        s["at_max_live"] += r["registers"] <= r["max_live_legalized"]


def _check_budget(rel: str, k: int, got: dict) -> None:
    assert got["error"] is None, f"K = {k}: {got['error']}"
    if k != 15:
        assert not got["refused"], f"K = {k}: refused {got['refused']}"
    for name, msg in got["refused"].items():
        assert_justified_refusal(msg, k)
        STATS["refused"].append((rel, name, msg))
    for r in got["rows"]:
        assert r["registers"] <= k, (r["name"], r["registers"])
        assert r["predicates"] <= 7 and r["stack_frame_bytes"] % 16 == 0
        assert r["budget"] == k
        if k == 255 and r["max_live_legalized"] <= 200 and \
                r.get("predicate_slots", {}).get("kept") != "slots":
            # room to spare: no spill stores or reloads (predicates beyond P6 go to general
            # registers, or to slots where that saves registers, knob PredicateSlots; the
            # convention's saves are not spills)
            assert not r["spill_code"], (r["name"], r["max_live"])
    assert not got["r31"], f"K = {k}: R31 used by {got['r31']}"
    _count(k, got["rows"])
    if got["ptxas"] is not None:
        ok, output = got["ptxas"]
        assert ok, f"K = {k}: ptxas rejects the output:\n{output}"


def _params():
    return [p for p in corpus_params()
            if p.values[0] is None or p.values[0]["path"] not in call_files()]


@pytest.mark.corpus
@pytest.mark.parametrize("entry", _params())
def test_corpus_file_allocates_and_assembles(entry):
    got = _result(entry["path"], BUDGETS)
    for k in BUDGETS:
        _check_budget(entry["path"], k, got["budgets"][k])
    STATS["files"] += 1
    STATS["seconds"] += got["seconds"]


def _call_params():
    if corpus_root() is None:
        return [pytest.param(None, None, marks=pytest.mark.skip(
            reason="../shared/corpus is absent"))]
    entries = {e["path"]: e for e in manifest()}
    out = []
    for rel in CALL_HEAVY:
        if rel not in entries:
            out.append(pytest.param(rel, 15, id=f"{rel}", marks=pytest.mark.skip(
                reason=f"{rel} is not in the corpus")))
    for rel in call_files():
        for k in CALL_BUDGETS:
            out.append(pytest.param(entries[rel], k, id=f"{rel}-K{k}"))
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("entry,k", _call_params())
def test_file_with_calls_allocates_assembles_and_verifies(entry, k):
    result = _result(entry["path"], CALL_BUDGETS)
    got = result["budgets"][k]
    if entry["path"] in CALL_HEAVY or k != 15:
        assert not got["refused"]
    calls = sum(r.get("convention", {}).get("calls", 0) for r in got["rows"])
    assert calls > (50 if entry["path"] in CALL_HEAVY else 0)
    STATS["calls"][k] += calls
    STATS["across"][k] += sum(r.get("convention", {}).get("values_live_across_calls", 0)
                              for r in got["rows"])
    for r in got["rows"]:
        if k <= 24 and "convention" in r:
            assert r["convention"]["callee_saved_used"] == []
    _check_budget(entry["path"], k, got)
    if k == CALL_BUDGETS[0]:
        STATS["files"] += 1
        STATS["seconds"] += result["seconds"]
    if got["verify_error"]:
        raise VerificationError(got["verify_error"])
    assert set(got["verified"]) == {True}


@pytest.mark.corpus
def test_zz_corpus_allocation_summary(capsys):
    if corpus_root() is None:
        pytest.skip("../shared/corpus is absent")
    if _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=True)
    if not STATS["files"]:
        pytest.skip("no corpus file was allocated in this run")
    with capsys.disabled():
        print(f"\ncorpus allocation: {STATS['files']} files, {STATS['seconds']:.1f} s of work")
        for k in (15, 32, 255):
            s = STATS[k]
            if not s["functions"]:
                continue
            print(f"  K = {k:3}: {s['functions']} functions, spill traffic {s['spill_bytes']} "
                  f"bytes (convention saves {s['save_bytes']}), moves coalesced "
                  f"{s['coalesced']} of {s['moves']}, registers <= MaxLive in "
                  f"{s['at_max_live']} ({100 * s['at_max_live'] / s['functions']:.1f} %)")
        for k in CALL_BUDGETS:
            print(f"  files with calls, K = {k:3}: {STATS['calls'][k]} calls, "
                  f"{STATS['across'][k]} values live across calls")
        print(f"  refused at K = 15: {len(STATS['refused'])}")
        for path, name, msg in STATS["refused"]:
            print(f"    {path}: {name}: {msg[:200]}")
    assert len(STATS["refused"]) <= MAX_REFUSED
