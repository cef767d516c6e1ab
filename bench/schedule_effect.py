"""The measured effect of pressure-aware scheduling before allocation (issue 13,
:mod:`ptxalloc.passes.schedule`): MaxLive as written and scheduled, and spill bytes (stores plus
reloads) with the pass off and on, per allocator and budget.

    PYTHONPATH=src python3 bench/schedule_effect.py [--budgets 32,64,255]
        [--allocators briggs,fatpoint] [--sources corpus,triton] [--every N]

Sources: every corpus file ptxas accepts (every N-th with ``--every``) and
``tests/data/triton/*.ptx``. Each function is allocated in process (``allocate_module``, every
allocation proven by the checker through the whole chain when scheduled); a function refused at
a budget (one instruction needs more) is left out of both columns at that budget. Prints one
table per source; the scheduling time is the pass alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, corpus_root, manifest  # noqa: E402

from ptxalloc.alloc.driver import Options  # noqa: E402
from ptxalloc.analysis import analyze_function  # noqa: E402
from ptxalloc.errors import AllocationError  # noqa: E402
from ptxalloc.passes.schedule import schedule_function  # noqa: E402
from ptxalloc.pipeline import allocate_module  # noqa: E402
from ptxalloc.ptx.parser import parse  # noqa: E402
from ptxalloc.target.sm import profile_for_module  # noqa: E402


def sources(which: list[str], every: int) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    if "corpus" in which:
        root = corpus_root()
        files = sorted(f["path"] for f in manifest() if f["ptxas"]["ok"])
        out["corpus"] = [root / p for p in files[::every]]
    if "triton" in which:
        out["triton"] = sorted((REPO / "tests" / "data" / "triton").glob("*.ptx"))
    return out


def measure(paths: list[Path], budgets: list[int], allocators: list[str]) -> dict:
    t = {"functions": 0, "scheduled": 0, "moved": 0, "maxlive": [0, 0], "lowered": 0,
         "sched_s": 0.0, "spill": {}}
    for path in paths:
        text = path.read_text(errors="replace")
        try:
            module = parse(text, str(path))
        except Exception:               # noqa: BLE001 - a file the parser refuses
            continue
        sm = profile_for_module(None, module)
        for fn in module.functions:
            t["functions"] += 1
            t0 = time.perf_counter()
            s = schedule_function(fn)
            t["sched_s"] += time.perf_counter() - t0
            before = analyze_function(fn, sm).pressure.max_live
            after = analyze_function(s.function, sm).pressure.max_live if s else before
            t["maxlive"][0] += before
            t["maxlive"][1] += after
            t["lowered"] += after < before
            if s:
                t["scheduled"] += 1
                t["moved"] += s.moved
            for a in allocators:
                for k in budgets:
                    row = t["spill"].setdefault((a, k), [0, 0, 0])
                    try:
                        got = []
                        for on in (False, True):
                            r = allocate_module(module, k, a, function=fn.name,
                                                options=Options(allocator=a, knobs={"schedule": int(on)}))
                            f = r.functions[0]
                            assert f.verified
                            got.append(f.spill_stores_bytes + f.spill_loads_bytes)
                    except AllocationError:
                        row[2] += 1
                        continue
                    row[0] += got[0]
                    row[1] += got[1]
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", default="32,64,255")
    ap.add_argument("--allocators", default="briggs,fatpoint")
    ap.add_argument("--sources", default="corpus,triton")
    ap.add_argument("--every", type=int, default=1)
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    allocators = args.allocators.split(",")
    for name, paths in sources(args.sources.split(","), args.every).items():
        t0 = time.perf_counter()
        t = measure(paths, budgets, allocators)
        print(f"## {name}: {len(paths)} files, {t['functions']} functions "
              f"({time.perf_counter() - t0:.0f} s)")
        print(f"scheduled {t['scheduled']} functions ({t['moved']} instructions moved) in "
              f"{t['sched_s']:.2f} s; MaxLive lowered in {t['lowered']}; sum of MaxLive "
              f"{t['maxlive'][0]} -> {t['maxlive'][1]}")
        print("| allocator | K | spill bytes, off | spill bytes, on | refused |")
        print("| --- | --- | --- | --- | --- |")
        for (a, k), (off, on, refused) in sorted(t["spill"].items()):
            print(f"| {a} | {k} | {off:,} | {on:,} | {refused} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
