"""Time of the allocation analyses — liveness, interference, spill costs (with the CFG they
stand on) — next to ptxas's own compile time (issue: target model and analyses).

1. The two largest corpus files: the analyses of every function, against ptxas's wall time on
   the file in the same run.
2. The largest function of the corpus: its instruction and register counts, the analyses'
   time, and the compile time ptxas reported for it (MANIFEST.json).
3. Growth: functions of increasing size, time per instruction — close to linear means this
   stays flat.

Target: the analyses of a function take less time than ptxas's whole compile of it.

    python3 bench/analyses.py
"""

from __future__ import annotations

import sys

from common import best_of, corpus_root, manifest, ptxas_seconds

from ptxalloc.analysis.costs import memory_latency, spill_costs
from ptxalloc.analysis.interference import InterferenceGraph
from ptxalloc.analysis.liveness import Liveness
from ptxalloc.ir.cfg import CFG
from ptxalloc.ptx import parse_file
from ptxalloc.target.sm import profile_for

FILES = ["gpuocelot/tests/ptx/unstructured/renderer.ptx",
         "ptx90parser/tests/sample/matrix_free_device_matrix_vector_01.1.sm_80.ptx"]


def analyse(fn, sm) -> None:
    cfg = CFG(fn)
    live = Liveness(cfg)
    InterferenceGraph(cfg, live)
    spill_costs(cfg, live, memory_latency(sm, 32, 256))


def main() -> int:
    root = corpus_root()
    files = {f["path"]: f for f in manifest()}
    print("1. whole files (analyses of every function vs ptxas on the file)")
    print(f"   {'file':<72} {'functions':>9} {'analyses s':>10} {'ptxas s':>8} {'ratio':>6}")
    for rel in FILES:
        module = parse_file(str(root / rel))
        sm = profile_for(None, module.sm)
        secs = best_of(lambda: [analyse(f, sm) for f in module.functions])
        px = ptxas_seconds(str(root / rel), files[rel]["ptxas_arch"])
        ratio = f"{secs / px:.2f}" if px else "n/a"
        print(f"   {rel:<72} {len(module.functions):>9} {secs:>10.3f} "
              f"{px if px else float('nan'):>8.3f} {ratio:>6}")

    rows = []
    for f in manifest():
        if not f["ptxas"]["ok"]:
            continue
        module = parse_file(str(root / f["path"]))
        ms = {x["name"]: x.get("compile_ms") for x in f["ptxas"]["functions"]}
        for fn in module.functions:
            rows.append((len(fn.instructions()), len(fn.regs), fn, f, ms.get(fn.name)))
    rows.sort(key=lambda r: r[0])
    n, nregs, fn, f, ptx_ms = rows[-1]
    sm = profile_for(None, None)
    secs = best_of(lambda: analyse(fn, sm))
    print("\n2. the largest function of the corpus")
    print(f"   {fn.name} ({f['path']}): {n} instructions, {nregs} virtual registers")
    print(f"   analyses {1000 * secs:.1f} ms; ptxas compile time {ptx_ms} ms; ratio "
          f"{secs * 1000 / ptx_ms:.2f}" if ptx_ms else "   (ptxas gave no compile time)")

    print("\n3. growth with function size (the largest function of each size bucket)")
    print(f"   {'instructions':>12} {'registers':>9} {'analyses ms':>11} {'us/instr':>8} "
          f"{'ptxas ms':>8} {'ratio':>6}")
    buckets = [50, 100, 200, 400, 800, 1600, 3200, 6400]
    slower = 0
    for lo, hi in zip([0] + buckets, buckets):
        pick = [r for r in rows if lo < r[0] <= hi]
        if not pick:
            continue
        n, nregs, fn, f, ptx_ms = pick[-1]
        secs = best_of(lambda: analyse(fn, sm))
        ratio = f"{secs * 1000 / ptx_ms:.2f}" if ptx_ms else "n/a"
        print(f"   {n:>12} {nregs:>9} {1000 * secs:>11.2f} {1e6 * secs / n:>8.1f} "
              f"{ptx_ms if ptx_ms else float('nan'):>8.1f} {ratio:>6}")
    # every function with a ptxas compile time
    for n, nregs, fn, f, ptx_ms in rows:
        if ptx_ms and n >= 200:
            if best_of(lambda: analyse(fn, sm), 1) * 1000 > ptx_ms:
                slower += 1
    print(f"\n   functions of 200+ instructions whose analyses took longer than ptxas's "
          f"whole compile: {slower}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
