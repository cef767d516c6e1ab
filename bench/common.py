"""Shared helpers of the benchmarks: where the corpus is, timing ptxas beside ptxalloc, and the
one budget rule both are given.

Budgets (``--budgets`` of the benchmarks): a number K gives ptxalloc ``--registers K`` and ptxas
``-maxrregcount K --override-directive-values`` (K for every function, directives included;
ptxas raises K below 24 to 24); ``default`` gives both their default, ptxas's register limit
(ptxalloc's ``registers=None``, ptxas without flags)."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def corpus_root() -> Path | None:
    env = os.environ.get("PTXALLOC_CORPUS")
    root = Path(env) if env else REPO.parent / "shared" / "corpus"
    return root if (root / "MANIFEST.json").is_file() else None


def manifest() -> list[dict]:
    root = corpus_root()
    if root is None:
        raise SystemExit("../shared/corpus is absent: nothing to measure")
    return json.loads((root / "MANIFEST.json").read_text())["files"]


def parse_budgets(text: str) -> list[int | None]:
    """``15,255,default`` -> [15, 255, None]."""
    return [None if b.strip() == "default" else int(b) for b in text.split(",")]


def budget_name(budget: int | None) -> str:
    return "default (ptxas's limit)" if budget is None else f"K={budget}"


def ptxas_budget_flags(budget: int | None) -> list[str]:
    """The ptxas flags that give ptxas the budget ptxalloc gets (module docstring)."""
    if budget is None:
        return []
    return [f"-maxrregcount={budget}", "--override-directive-values"]


def choose_allocators(text: str | None) -> list[str]:
    """``--allocators a,b``: those (each must be registered), else every registered heuristic
    (the exact allocator is the yardstick of bench/grade.py, too slow for corpus-wide runs)."""
    from ptxalloc.alloc import api

    chosen = text.split(",") if text else api.names(heuristics_only=True)
    unknown = [x for x in chosen if x not in api.names()]
    if unknown:
        raise SystemExit(f"unknown allocator(s) {', '.join(unknown)} "
                         f"(known: {', '.join(api.names())})")
    return chosen


def best_of(fn, repeat: int = 3) -> float:
    """The fastest of ``repeat`` wall-clock timings of ``fn()`` in seconds."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def ptxas_seconds(path: str, arch: str, extra: list[str] | None = None,
                  repeat: int = 3) -> float | None:
    """Best wall time of ``ptxas -arch=<arch> file`` (None without ptxas or when it fails)."""
    from ptxalloc import ptxas
    if not ptxas.available():
        return None
    best = None
    for _ in range(repeat):
        r = ptxas.assemble_file(path, arch, extra)
        if not r.ok:
            return None
        best = r.seconds if best is None else min(best, r.seconds)
    return best


def ptxas_cpu_seconds(path: str, arch: str, extra: list[str] | None = None,
                      repeat: int = 3) -> float | None:
    """Least CPU time (user + system, from ``getrusage(RUSAGE_CHILDREN)``) of ``ptxas
    -arch=<arch> file`` over ``repeat`` runs: unlike wall time, it does not grow when other
    processes share the machine (None without ptxas or when it fails)."""
    from ptxalloc import ptxas
    if not ptxas.available():
        return None
    best = None
    for _ in range(repeat):
        before = children_cpu()
        r = ptxas.assemble_file(path, arch, extra)
        if not r.ok:
            return None
        cpu = children_cpu() - before
        best = cpu if best is None else min(best, cpu)
    return best


def children_cpu() -> float:
    """CPU seconds (user + system) of the child processes this one has waited for."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def median(xs):
    return statistics.median(xs) if xs else float("nan")
