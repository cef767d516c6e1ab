"""Shared helpers of the benchmarks: where the corpus is, timing ptxas beside ptxalloc."""

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


def median(xs):
    return statistics.median(xs) if xs else float("nan")
