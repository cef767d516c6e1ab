"""Every heuristic graded against the optimum over the corpus (issue 18; :mod:`ptxalloc.grade`).

    PYTHONPATH=src python3 bench/grade.py [--budgets 15,24,32] [--max-instructions 300]
        [--limit FILES] [--stride N] [--time-limit S] [--jobs N] [--out ROWS.jsonl [--resume]]
        [--summary ROWS.jsonl] [--json OUT.json] [--max-seconds S]

For every corpus file ptxas accepts (sorted by path; every ``--stride``-th, at most ``--limit``
of them), every function of at most ``--max-instructions`` instructions, and every budget:
each heuristic's first-round spill cost and the optimal allocator's first round (proven
optimal, or the best found and its lower bound within ``--time-limit`` seconds), all through
the ordinary pipeline and checker (``ptxalloc grade``; where a heuristic spills nothing the
optimum is 0 and no solver runs: :func:`ptxalloc.grade.grade_module`'s ``shortcut``).

The files are taken interleaved (file 0, 6, 12, ..., then 1, 7, ...), so a run stopped early
has sampled the whole corpus. ``--jobs N`` grades N functions at once in worker processes (the
solver itself uses one thread). ``--out`` writes one JSON line per function and budget as each
function finishes (``{"file", "name", "k", "optimal", "allocators"}``, or ``"error"`` when the
pipeline raised something other than a refusal); ``--resume`` reads the lines already there and
grades only the functions missing, so an interrupted run continues. ``--summary ROWS.jsonl``
prints the summary of such a file without grading anything.

The summary, per budget and heuristic: the distribution of the gap over the functions solved to
optimality (median, p90, share within 5 %, a histogram), also over those where someone spills
(the functions that say something), how many functions were solved, how many needed the solver
and its times, and every function where a heuristic is more than 5 % off — the input of the
quality issue. ``--json`` keeps every row in one file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import corpus_root, manifest  # noqa: E402

from ptxalloc.files import write_output  # noqa: E402

WITHIN = 5.0        # percent
#: histogram of the gap, in percent: (label, upper end inclusive)
BUCKETS = (("0", 0.0), ("(0,5]", WITHIN), ("(5,25]", 25.0), ("(25,100]", 100.0),
           (">100", float("inf")))


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _gap(g) -> float:
    return float("inf") if g is None else g


def _spills(row: dict, name: str) -> bool:
    """The optimum or the heuristic ``name`` spills something (None: an infinite cost)."""
    cost = row["allocators"][name].get("spill_cost")
    return row["optimal"]["spill_cost"] > 0 or cost is None or cost > 0


def _histogram(gaps: list[float]) -> str:
    counts = []
    low = -1.0
    for label, high in BUCKETS:
        n = sum(1 for g in gaps if low < g <= high)
        counts.append(f"{label}: {n}")
        low = high
    unbounded = sum(1 for g in gaps if g == float("inf"))
    return ", ".join(counts) + (f" (of them unbounded: {unbounded})" if unbounded else "")


def summarize(rows: list[dict], budgets: list[int], name_functions: bool = True) -> list[str]:
    """The summary lines of graded rows (module docstring)."""
    out = []
    errors = [r for r in rows if "error" in r]
    if errors:
        out.append(f"{len(errors)} function/budget pair(s) raised an error (not a refusal):")
        out.extend(f"  {r['file']}:{r['name']} K={r['k']}: {r['error']}" for r in errors)
    rows = [r for r in rows if "error" not in r]
    for k in budgets:
        mine = [r for r in rows if r["k"] == k and "refused" not in r["optimal"]]
        solved = [r for r in mine if r["optimal"]["optimal"]]
        ran = [r for r in mine if "reached_by" not in r["optimal"]]
        times = [r["optimal"].get("solver_seconds", 0.0) for r in ran if r["optimal"]["optimal"]]
        refused = sum(1 for r in rows if r["k"] == k and "refused" in r["optimal"])
        out.append(f"K = {k}: {len(mine)} functions allocated ({refused} refused: an instruction "
                   f"needs more), {len(solved)} solved to optimality, "
                   f"{len(mine) - len(solved)} stopped by the time limit; "
                   f"{len(mine) - len(ran)} needed no solver (a heuristic spills nothing)")
        if times:
            out.append(f"  solver seconds where it ran ({len(ran)}), over the {len(times)} "
                       f"solved: median "
                       f"{statistics.median(times):.3f}, p90 {_quantile(times, 0.9):.3f}, "
                       f"max {max(times):.3f}")
        heuristics = sorted({a for r in mine for a in r["allocators"]})
        for name in heuristics:
            for label, pick in (("all solved", lambda r: True),
                                ("someone spills", lambda r, n=name: _spills(r, n))):
                gaps = [_gap(r["allocators"][name].get("gap")) for r in solved
                        if "refused" not in r["allocators"][name] and pick(r)]
                if not gaps:
                    continue
                within = sum(1 for g in gaps if g <= WITHIN) / len(gaps)
                out.append(f"  {name:<9} {label:<15} n={len(gaps):<5} median "
                           f"{_quantile(gaps, 0.5):6.1f}%  p90 {_quantile(gaps, 0.9):6.1f}%  "
                           f"within {WITHIN:g}%: {100 * within:5.1f}%")
                if label == "someone spills":
                    out.append(f"  {'':<9} {'':<15} gap histogram: {_histogram(gaps)}")
        for name in heuristics:
            off = [f"{r['file']}:{r['name']} ({_gap(r['allocators'][name].get('gap')):.1f}%)"
                   for r in solved if _gap(r["allocators"][name].get("gap")) > WITHIN]
            if off:
                out.append(f"  {name} more than {WITHIN:g}% off at K = {k} ({len(off)})"
                           + (": " + ", ".join(off) if name_functions else ""))
    return out


def interleaved(items: list, stride: int = 6) -> list:
    """``items`` in the order 0, s, 2s, ..., 1, 1+s, ...: a prefix samples the whole list."""
    return [x for start in range(stride) for x in items[start::stride]]


def read_rows(path: str) -> list[dict]:
    """The complete JSON lines of ``path`` (a line cut short by an interrupted run is dropped)."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


_MODULES: dict[str, object] = {}


def grade_function(task: tuple[str, str, list[int], float]) -> list[dict]:
    """One function at every budget: its rows (the worker's job; the parsed module is kept
    for the next function of the same file)."""
    from ptxalloc.grade import grade_module
    from ptxalloc.ptx import parse_file

    path, name, budgets, time_limit = task
    if path not in _MODULES:
        _MODULES.clear()
        _MODULES[path] = parse_file(str(corpus_root() / path))
    module = _MODULES[path]
    rows = []
    for k in budgets:
        try:
            got = grade_module(module, k, function=name, time_limit=time_limit, shortcut=True)
        except Exception as e:          # a finding (a checker failure...), not a reason to stop
            rows.append({"file": path, "name": name, "k": k,
                         "error": f"{type(e).__name__}: {e}"})
            continue
        for row in got:
            row.update(file=path, k=k)
            rows.append(row)
    return rows


def small_functions(files: list[dict], max_instructions: int) -> list[tuple[str, str]]:
    """(path, function) of every function of at most ``max_instructions`` instructions."""
    from ptxalloc.errors import PtxallocError
    from ptxalloc.ir.cfg import CFG
    from ptxalloc.ptx import parse_file

    root = corpus_root()
    out = []
    for entry in files:
        try:
            module = parse_file(str(root / entry["path"]))
        except PtxallocError:
            continue
        out.extend((entry["path"], fn.name) for fn in module.functions
                   if len(CFG(fn).instrs) <= max_instructions)
    return out


def _line(row: dict) -> str:
    if "error" in row:
        return f"{row['file']}:{row['name']} K={row['k']} error {row['error']}"
    best = row["optimal"]
    return f"{row['file']}:{row['name']} K={row['k']} " + (
        "refused" if "refused" in best else
        f"{'opt' if best['optimal'] else 'lim'} {best['spill_cost']:g} "
        + " ".join(f"{a}={_gap(g.get('gap')):.1f}%" for a, g in row["allocators"].items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", default="15,24,32")
    ap.add_argument("--max-instructions", type=int, default=300)
    ap.add_argument("--limit", type=int, default=None, help="at most this many files")
    ap.add_argument("--stride", type=int, default=1, help="every N-th file")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--out", metavar="ROWS.jsonl", help="one JSON line per function and budget")
    ap.add_argument("--resume", action="store_true",
                    help="keep the lines of --out and grade only the functions missing")
    ap.add_argument("--summary", metavar="ROWS.jsonl", help="summarize this file; grade nothing")
    ap.add_argument("--no-names", action="store_true",
                    help="count the functions more than 5%% off without naming them")
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="start no new function after this many seconds (the summary says so)")
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    if args.summary:
        rows = read_rows(args.summary)
        print(f"{len({(r['file'], r['name']) for r in rows})} functions in {args.summary}")
        print("\n".join(summarize(rows, budgets, not args.no_names)))
        return 0
    files = [f for f in sorted(manifest(), key=lambda f: f["path"]) if f["ptxas"]["ok"]]
    files = files[::args.stride][:args.limit]
    t0 = time.perf_counter()
    tasks = small_functions(interleaved(files), args.max_instructions)
    rows = read_rows(args.out) if args.out and args.resume else []
    have = {(r["file"], r["name"], r["k"]) for r in rows}
    todo = [(p, n, budgets, args.time_limit) for p, n in tasks
            if any((p, n, k) not in have for k in budgets)]
    rows = [r for r in rows if (r["file"], r["name"]) not in {(p, n) for p, n, *_ in todo}]
    print(f"{len(tasks)} functions of at most {args.max_instructions} instructions in "
          f"{len(files)} files; {len(tasks) - len(todo)} graded already, {len(todo)} to grade",
          file=sys.stderr, flush=True)
    sink = open(args.out, "w") if args.out else None
    if sink:        # rewritten whole: the kept lines, then each function as it finishes
        for r in rows:
            sink.write(json.dumps(r) + "\n")
        sink.flush()
    if args.jobs > 1:
        import multiprocessing
        pool = multiprocessing.Pool(args.jobs)
        results = pool.imap_unordered(grade_function, todo)
    else:
        pool = None
        results = map(grade_function, todo)
    stopped = False
    try:
        for got in results:
            rows.extend(got)
            for row in got:
                print(_line(row), file=sys.stderr, flush=True)
                if sink:
                    sink.write(json.dumps(row) + "\n")
            if sink:
                sink.flush()
            if args.max_seconds is not None and time.perf_counter() - t0 > args.max_seconds:
                stopped = True
                break
    finally:
        if pool is not None:
            pool.terminate()
        if sink:
            sink.close()
    if stopped:
        print(f"stopped by --max-seconds {args.max_seconds:g}")
    print(f"{len({(r['file'], r['name']) for r in rows})} functions of at most "
          f"{args.max_instructions} instructions, budgets {budgets}, time limit "
          f"{args.time_limit:g} s, {args.jobs} job(s), {time.perf_counter() - t0:.0f} s "
          f"this run")
    print("\n".join(summarize(rows, budgets, not args.no_names)))
    if args.json:
        write_output(args.json, json.dumps({"rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
