"""Where spill bytes come from (issue 13): per function, the spilled values (slots), their
stores and reloads, the reloads that follow an access of the same slot in the same block
(candidates for one reload serving several uses), and the accesses inside loops.

    PYTHONPATH=src python3 bench/spill_sources.py FILE.ptx [...] [--registers K]
        [--allocator NAME] [--knob NAME=VALUE ...] [--top N]

Figures are of the allocated function as written (after every clean-up), no checker. The
totals line sums every function; ``--top`` lists the functions with the most spill bytes.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter


def sources(fn, registers: int, allocator: str, knobs: dict, decls: list[str], sm):
    """(spill bytes, Counter of the figures) of one function, or None when refused."""
    from ptxalloc.alloc.driver import Options, allocate_function
    from ptxalloc.errors import AllocationError
    from ptxalloc.ir.cfg import CFG

    try:
        r = allocate_function(fn, sm, registers, Options(allocator=allocator, knobs=knobs),
                              decls)
    except AllocationError:
        return None
    fig: Counter = Counter()
    slots = set()
    for b in CFG(r.function).blocks:
        seen = set()
        for ins in b.instrs:
            o = ins.origin
            if o is None or o.slot is None:
                continue
            slots.add(o.slot)
            kind = "reload" if o.loads else "store"
            fig[kind] += 1
            if b.depth:
                fig[f"{kind} in a loop"] += 1
            if o.loads and o.slot in seen:
                fig["reload after an access in the block"] += 1
            seen.add(o.slot)
    fig["slots"] = len(slots)
    return r.spill_stores_bytes + r.spill_loads_bytes, fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--registers", type=int, default=32)
    ap.add_argument("--allocator", default="briggs")
    ap.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args(argv)
    from ptxalloc.alloc.knobs import parse_knobs
    from ptxalloc.ptx import parse_file
    from ptxalloc.target.sm import profile_for

    knobs = parse_knobs(args.knob)
    rows = []
    total: Counter = Counter()
    for path in args.files:
        module = parse_file(path)
        sm = profile_for(None, module.sm)
        decls = module.declarations()
        for fn in module.functions:
            got = sources(fn, args.registers, args.allocator, knobs, decls, sm)
            if got is None or not got[0]:
                continue
            rows.append((got[0], fn.name, got[1]))
            total.update(got[1])
            total["bytes"] += got[0]
    order = ("slots", "store", "reload", "reload after an access in the block",
             "store in a loop", "reload in a loop")
    for spill, name, fig in sorted(rows, key=lambda r: -r[0])[:args.top]:
        print(f"{spill:>7} B  {name[:60]}: " + ", ".join(f"{k} {fig[k]}" for k in order))
    print(f"{total['bytes']:>7} B  total over {len(rows)} functions that spill: "
          + ", ".join(f"{k} {total[k]}" for k in order))
    return 0


if __name__ == "__main__":
    sys.exit(main())
