"""Corpus proof (issue 5, SPEC section 9): every function of every corpus file ptxas accepts
allocates, with every registered allocator (:func:`ptxalloc.alloc.api.names`), at K = 15 and
K = 255 — or is refused with an AllocationError naming the instruction
(SPEC section 2: some budgets are impossible) — and the independent checker proves every
allocation. The last test prints the counts and the checker's time as a fraction of the
allocation time (target: under 20 %).

Skipped where ``../shared/corpus`` is absent.
"""

from __future__ import annotations

import re
import time

import pytest

from conftest import assert_justified_refusal, corpus_params, corpus_root
from ptxalloc.alloc import api
from ptxalloc.errors import AllocationError, VerificationError
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file
from ptxalloc.verify import verify_module_text

BUDGETS = (15, 255)
#: the exact allocator is proven on the small functions it can solve (tests/unit/test_optimal.py)
ALLOCATORS = api.names(heuristics_only=True)

#: (allocator, budget) -> counters, filled by the tests and printed by the last one
STATS: dict[tuple[str, int], dict[str, float]] = {
    (a, k): {"files": 0, "functions": 0, "verified": 0, "refused": 0, "refuted": 0,
             "alloc_s": 0.0, "verify_s": 0.0} for a in ALLOCATORS for k in BUDGETS}


def prove_file(path: str, budget: int, allocator: str = "briggs") -> dict:
    """Allocate every function of a file at ``budget`` and prove the allocation; returns the
    counts, the refutations (function, message, whether the calling convention applies to it)
    and the seconds spent allocating and verifying (the refusal search is not timed; the
    verification timed is the one pass over the text that proves every other function)."""
    module = parse_file(path)
    refused: set[str] = set()
    t0 = time.perf_counter()
    try:
        result = allocate_module(module, budget, allocator, verify=False)
        alloc_s = time.perf_counter() - t0
    except AllocationError:
        for fn in module.functions:
            try:
                allocate_module(module, budget, allocator, function=fn.name, verify=False)
            except AllocationError as e:
                assert_justified_refusal(str(e), budget)
                refused.add(fn.name)
        module = module.without(refused)
        t0 = time.perf_counter()
        result = allocate_module(module, budget, allocator, verify=False)
        alloc_s = time.perf_counter() - t0
    results = list(result.functions)
    refuted = []
    while True:
        t0 = time.perf_counter()
        try:
            verify_module_text(module, result.ptx, results)
            verify_s = time.perf_counter() - t0
            break
        except VerificationError as e:
            m = re.match(r"(?:kernel|function) '([^']+)'", str(e))
            bad = [r for r in results if m and r.name == m.group(1)]
            if not bad:
                raise
            results.remove(bad[0])
            refuted.append((bad[0].name, str(e),
                            bool(re.search(r"//@ptxalloc[^\n]*\babi=1", bad[0].text or ""))))
    unproven = [f.name for f in results if f.verified is not True]
    return {"functions": len(result.functions) + len(refused), "refused": len(refused),
            "verified": len(results) - len(unproven), "unproven": unproven,
            "refuted": refuted, "alloc_s": alloc_s, "verify_s": verify_s}


@pytest.mark.corpus
@pytest.mark.parametrize("allocator", ALLOCATORS)
@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("entry", corpus_params())
def test_corpus_allocations_verify(entry, budget, allocator):
    got = prove_file(str(corpus_root() / entry["path"]), budget, allocator)
    s = STATS[allocator, budget]
    s["files"] += 1
    s["refuted"] += len(got["refuted"])
    for k in ("functions", "verified", "refused", "alloc_s", "verify_s"):
        s[k] += got[k]
    assert not got["unproven"], got["unproven"]
    assert not got["refuted"], "\n".join(msg for _, msg, _ in got["refuted"])


@pytest.mark.corpus
def test_zz_corpus_summary(capsys):
    if corpus_root() is None:
        pytest.skip("../shared/corpus is absent")
    lines = []
    for (a, k), s in STATS.items():
        if not s["files"]:
            continue
        frac = s["verify_s"] / s["alloc_s"] if s["alloc_s"] else 0.0
        lines.append(f"{a} K={k}: {s['files']} files, {s['functions']} functions: "
                     f"{s['verified']} verified, {s['refused']} refused, {s['refuted']} refuted; "
                     f"allocation "
                     f"{s['alloc_s']:.1f} s, checker {s['verify_s']:.1f} s "
                     f"({100 * frac:.1f} % of allocation)")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
