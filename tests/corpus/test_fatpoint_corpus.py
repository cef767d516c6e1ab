"""Corpus conformance of the fat-point allocator (issue 6): every function of every corpus file
ptxas accepts allocates with ``--allocator fatpoint`` at K = 15, K = 255 and ``--registers
auto``, within its budget, is proven by the independent checker, and the allocated module
assembles with ptxas for the manifest's ``ptxas_arch``. At K = 15 a function may instead be
refused with an AllocationError that names an instruction needing more than 15 registers at once
(SPEC section 2: some budgets are impossible); refusals are counted, not failures, and none is
allowed at K = 255 or under ``auto``. The last test prints the counts per budget.

Skipped where ``../shared/corpus`` is absent. Each file's work (three budgets, the checker,
ptxas) runs in a pool of worker processes a few files ahead of the test that checks it.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from conftest import assert_justified_refusal, corpus_files, corpus_params, corpus_root

BUDGETS = (15, 255, "auto")
WINDOW = 6


def _work(rel: str, arch: str) -> dict:
    """Allocate, prove and assemble one corpus file at every budget; plain data back."""
    from ptxalloc import ptxas
    from ptxalloc.errors import AllocationError, PtxallocError
    from ptxalloc.ir.module import Function, Module
    from ptxalloc.pipeline import allocate_module
    from ptxalloc.ptx import parse_file

    t0 = time.perf_counter()
    module = parse_file(str(corpus_root() / rel))
    out: dict = {}
    for k in BUDGETS:
        got: dict = {"error": None, "refused": {}, "rows": [], "ptxas": None}
        out[k] = got
        try:
            try:
                res = allocate_module(module, k, "fatpoint", verify=True)
            except AllocationError:
                for fn in module.functions:
                    try:
                        allocate_module(module, k, "fatpoint", function=fn.name, verify=False)
                    except AllocationError as e:
                        got["refused"][fn.name] = str(e)
                kept = Module([it for it in module.items if not (
                    type(it) is Function and it.name in got["refused"])], module.filename,
                    module.version, list(module.target), module.address_size)
                res = allocate_module(kept, k, "fatpoint", verify=True)
        except PtxallocError as e:
            got["error"] = f"{type(e).__name__}: {e}"
            continue
        for fr in res.functions:
            row = fr.report()
            row.pop("seconds", None)
            got["rows"].append(row)
        if ptxas.available():
            a = ptxas.assemble(res.ptx, arch)
            got["ptxas"] = (a.ok, a.output[:3000])
    out["seconds"] = time.perf_counter() - t0
    return out


_POOL: ProcessPoolExecutor | None = None
_FUTURES: dict = {}


def _result(entry: dict) -> dict:
    global _POOL
    files = corpus_files()
    i = [f["path"] for f in files].index(entry["path"])
    if _POOL is None:
        _POOL = ProcessPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                    mp_context=multiprocessing.get_context("fork"))
    for f in files[i:i + WINDOW]:
        if f["path"] not in _FUTURES:
            _FUTURES[f["path"]] = _POOL.submit(_work, f["path"], f["ptxas_arch"])
    return _FUTURES.pop(entry["path"]).result()


STATS: dict = {"files": 0, "seconds": 0.0,
               **{k: {"allocated": 0, "refused": 0, "verified": 0, "spill_bytes": 0,
                      "attempts": 0, "registers": 0} for k in BUDGETS}}


@pytest.mark.corpus
@pytest.mark.parametrize("entry", corpus_params())
def test_corpus_file_allocates_verifies_and_assembles_with_fatpoint(entry):
    got = _result(entry)
    for k in BUDGETS:
        g = got[k]
        assert g["error"] is None, f"K = {k}: {g['error']}"
        if k != 15:
            assert not g["refused"], f"K = {k}: refused {g['refused']}"
        for name, msg in g["refused"].items():
            assert_justified_refusal(msg, k)
        s = STATS[k]
        for r in g["rows"]:
            assert r["allocator"] == "fatpoint"
            budget = r["budget"]
            if k == "auto":
                assert r["budget_reason"].startswith("auto:"), r["name"]
            else:
                assert budget == k
            assert r["registers"] <= budget, (r["name"], r["registers"], budget)
            # (no attempt at all when every value is bound by the convention: funcDouble)
            assert r["final_target"] <= budget
            assert r["verified"] is True, r["name"]
            s["allocated"] += 1
            s["verified"] += 1
            s["spill_bytes"] += r["spill_stores_bytes"] + r["spill_loads_bytes"]
            s["attempts"] += r["fatpoint_attempts"]
            s["registers"] += r["registers"]
        s["refused"] += len(g["refused"])
        if g["ptxas"] is not None:
            ok, output = g["ptxas"]
            assert ok, f"K = {k}: ptxas rejects the output:\n{output}"
    STATS["files"] += 1
    STATS["seconds"] += got["seconds"]


@pytest.mark.corpus
def test_zz_fatpoint_corpus_summary(capsys):
    if corpus_root() is None:
        pytest.skip("../shared/corpus is absent")
    if _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=True)
    if not STATS["files"]:
        pytest.skip("no corpus file was allocated in this run")
    with capsys.disabled():
        print(f"\nfat-point corpus: {STATS['files']} files, {STATS['seconds']:.1f} s of work")
        for k in BUDGETS:
            s = STATS[k]
            print(f"  K = {k}: {s['allocated']} functions allocated, {s['refused']} refused, "
                  f"{s['verified']} verified; {s['registers']} registers, {s['spill_bytes']} "
                  f"spill bytes, {s['attempts']} fat-point attempts")
