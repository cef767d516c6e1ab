"""Every heuristic graded against the optimum over the corpus (issue 18; :mod:`ptxalloc.grade`).

    PYTHONPATH=src python3 bench/grade.py [--budgets 15,24,32] [--max-instructions 300]
        [--limit FILES] [--stride N] [--time-limit S] [--json OUT.json]

For every corpus file ptxas accepts (sorted by path; every ``--stride``-th, at most ``--limit``
of them), every function of at most ``--max-instructions`` instructions, and every budget:
the optimal allocator's first round (proven optimal, or the best found and its lower bound
within ``--time-limit`` seconds) and each heuristic's first-round spill cost, all through the
ordinary pipeline and checker (``ptxalloc grade``). Prints, per budget and heuristic, the
distribution of the gap over the functions solved to optimality (median, p90, share within
5 %), also over those where someone spills (the functions that say something), how many
functions were solved and the solver's times, and names every function where a heuristic is
more than 5 % off — the input of the quality issue. ``--json`` keeps every row.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import corpus_root, manifest  # noqa: E402

from ptxalloc.errors import PtxallocError  # noqa: E402
from ptxalloc.files import write_output  # noqa: E402
from ptxalloc.grade import grade_module  # noqa: E402
from ptxalloc.ir.cfg import CFG  # noqa: E402
from ptxalloc.ptx import parse_file  # noqa: E402

WITHIN = 5.0        # percent


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _gap(g) -> float:
    return float("inf") if g is None else g


def _spills(row: dict, name: str) -> bool:
    """The optimum or the heuristic ``name`` spills something (None: an infinite cost)."""
    cost = row["allocators"][name].get("spill_cost")
    return row["optimal"]["spill_cost"] > 0 or cost is None or cost > 0


def summarize(rows: list[dict], budgets: list[int]) -> list[str]:
    out = []
    for k in budgets:
        mine = [r for r in rows if r["k"] == k and "refused" not in r["optimal"]]
        solved = [r for r in mine if r["optimal"]["optimal"]]
        times = [r["optimal"].get("solver_seconds", 0.0) for r in solved]
        refused = sum(1 for r in rows if r["k"] == k and "refused" in r["optimal"])
        out.append(f"K = {k}: {len(mine)} functions allocated ({refused} refused: an instruction "
                   f"needs more), {len(solved)} solved to optimality"
                   + (f" (solver seconds: median {statistics.median(times):.3f}, p90 "
                      f"{_quantile(times, 0.9):.3f}, max {max(times):.3f})" if times else "")
                   + f", {len(mine) - len(solved)} stopped by the time limit")
        heuristics = sorted({a for r in mine for a in r["allocators"]})
        for name in heuristics:
            for label, pick in (("all solved", lambda r: True),
                                ("someone spills", lambda r, n=name: _spills(r, n))):
                gaps = [_gap(r["allocators"][name].get("gap")) for r in solved
                        if "refused" not in r["allocators"][name] and pick(r)]
                if not gaps:
                    continue
                within = sum(1 for g in gaps if g <= WITHIN) / len(gaps)
                out.append(f"  {name:<9} {label:<15} n={len(gaps):<4} median "
                           f"{_quantile(gaps, 0.5):6.1f}%  p90 {_quantile(gaps, 0.9):6.1f}%  "
                           f"within {WITHIN:g}%: {100 * within:5.1f}%")
        for name in heuristics:
            off = [f"{r['file']}:{r['name']} ({_gap(r['allocators'][name].get('gap')):.1f}%)"
                   for r in solved if _gap(r["allocators"][name].get("gap")) > WITHIN]
            if off:
                out.append(f"  {name} more than {WITHIN:g}% off at K = {k} ({len(off)}): "
                           + ", ".join(off))
    return out


def _out_of_time(args, t0: float) -> bool:
    return args.max_seconds is not None and time.perf_counter() - t0 > args.max_seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", default="15,24,32")
    ap.add_argument("--max-instructions", type=int, default=300)
    ap.add_argument("--limit", type=int, default=None, help="at most this many files")
    ap.add_argument("--stride", type=int, default=1, help="every N-th file")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="start no new function after this many seconds (the summary says so)")
    args = ap.parse_args()
    root = corpus_root()
    budgets = [int(b) for b in args.budgets.split(",")]
    files = [f for f in sorted(manifest(), key=lambda f: f["path"]) if f["ptxas"]["ok"]]
    files = files[::args.stride][:args.limit]
    rows = []
    t0 = time.perf_counter()
    done = 0
    for entry in files:
        if _out_of_time(args, t0):
            break
        done += 1
        try:
            module = parse_file(str(root / entry["path"]))
        except PtxallocError:
            continue
        small = [fn.name for fn in module.functions
                 if len(CFG(fn).instrs) <= args.max_instructions]
        for name in small:
            if _out_of_time(args, t0):
                break
            for k in budgets:
                for row in grade_module(module, k, function=name, time_limit=args.time_limit):
                    row.update(file=entry["path"], k=k)
                    rows.append(row)
                    best = row["optimal"]
                    print(f"{entry['path']}:{name} K={k} " + (
                        "refused" if "refused" in best else
                        f"{'opt' if best['optimal'] else 'lim'} {best['spill_cost']:g} "
                        + " ".join(f"{a}={_gap(g.get('gap')):.1f}%"
                                   for a, g in row["allocators"].items())),
                        file=sys.stderr, flush=True)
    if _out_of_time(args, t0):
        print(f"stopped by --max-seconds {args.max_seconds:g} in file {done} of {len(files)}")
    print(f"{done} files, {len({(r['file'], r['name']) for r in rows})} functions of at "
          f"most {args.max_instructions} instructions, budgets {budgets}, time limit "
          f"{args.time_limit:g} s, {time.perf_counter() - t0:.0f} s in all")
    print("\n".join(summarize(rows, budgets)))
    if args.json:
        write_output(args.json, json.dumps({"rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
