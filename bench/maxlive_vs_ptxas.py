"""MaxLive of every corpus function next to what ptxas reports ("Used N registers",
MANIFEST.json): a sanity view, not an equality — ptxas allocates machine code after its own
optimizations, ptxalloc measures the PTX as written.

    python3 bench/maxlive_vs_ptxas.py [--recompute]

``--recompute``: MaxLive after recomputation at the use (``passes/recompute.py``, on by default
in ``allocate``), the code the allocator colors.
"""

from __future__ import annotations

import sys
from collections import Counter

from common import corpus_root, manifest

from ptxalloc.analysis import analyze_function
from ptxalloc.ptx import parse_file
from ptxalloc.target.sm import profile_for


def main() -> int:
    recompute = "--recompute" in sys.argv[1:]
    if recompute:
        from ptxalloc.passes.recompute import recompute_function
    root = corpus_root()
    pairs = []
    for f in manifest():
        if not f["ptxas"]["ok"]:
            continue
        used = {x["name"]: x.get("registers") for x in f["ptxas"]["functions"]}
        module = parse_file(str(root / f["path"]))
        sm = profile_for(None, module.sm)
        for fn in module.functions:
            if recompute:
                r = recompute_function(fn)
                fn = r.function if r else fn
            ml = analyze_function(fn, sm).pressure.max_live
            pairs.append((ml, used.get(fn.name)))
    buckets = [8, 16, 32, 64, 128, 256, 1024]
    print(f"{'MaxLive':>12} {'functions':>9} {'with ptxas figure':>17} {'ptxas median':>12} "
          f"{'ptxas/MaxLive':>13}")
    lo = 0
    for hi in buckets:
        sel = [p for p in pairs if lo < p[0] <= hi or (lo == 0 and p[0] == 0)]
        with_px = sorted(p[1] for p in sel if p[1])
        ratio = sorted(p[1] / p[0] for p in sel if p[1] and p[0])
        med = with_px[len(with_px) // 2] if with_px else float("nan")
        rmed = ratio[len(ratio) // 2] if ratio else float("nan")
        print(f"{f'{lo + 1}..{hi}':>12} {len(sel):>9} {len(with_px):>17} {med:>12} {rmed:>13.2f}")
        lo = hi
    both = [p for p in pairs if p[1]]
    above = sum(1 for ml, px in both if px > ml)
    print(f"\n{len(pairs)} functions, {len(both)} with a ptxas register count; ptxas used more "
          f"registers than MaxLive for {above} ({100 * above / max(len(both), 1):.0f} %)")
    print("distribution of ptxas - MaxLive:",
          sorted(Counter(max(-20, min(20, px - ml)) for ml, px in both).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
