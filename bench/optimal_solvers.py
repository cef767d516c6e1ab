"""CP-SAT against HiGHS on the optimal allocator's integer program (issue 18; the formulation
of :mod:`ptxalloc.alloc.optimal`): which maintained solver proves the minimum spill cost faster.

    PYTHONPATH=src python3 bench/optimal_solvers.py [--files N] [--time-limit S]

For corpus files (sorted by path, every ``--stride``-th one up to ``--files``), every function
of up to ``--max-instructions`` instructions at K = 15 and 24: the first round's Problem (taken
by a capturing allocator run through the ordinary driver), formulated once, then solved by
OR-Tools CP-SAT (one worker, linear scan's coloring as the hint, as the allocator does) and by
HiGHS through ``scipy.optimize.milp`` (the same rows: one equality per node, one at-most-one row
per clique and unit). Problems that simplify empties are skipped (no solver runs). Prints one
line per problem and the totals: solved to optimality, seconds, agreements.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import corpus_root, manifest  # noqa: E402

from ptxalloc.alloc import api  # noqa: E402
from ptxalloc.alloc.linear import color as linear_color  # noqa: E402
from ptxalloc.alloc.optimal import formulate, solve_cpsat  # noqa: E402
from ptxalloc.errors import PtxallocError  # noqa: E402
from ptxalloc.ir.cfg import CFG  # noqa: E402
from ptxalloc.pipeline import allocate_module  # noqa: E402
from ptxalloc.ptx import parse_file  # noqa: E402


class Capture:
    """Linear scan that keeps each function's first-round Problem."""

    name = "capture"
    description = "linear scan, keeping the first round's problem (bench only)"
    coalesces = False

    def __init__(self):
        self.problems = []
        self.seen = set()

    def color(self, problem, options):
        return linear_color(problem)

    def open(self, fn, budget, options):
        from ptxalloc.alloc.session import PlainSession
        outer = self

        def color(problem, options):
            key = (fn.name, budget)
            if key not in outer.seen:
                outer.seen.add(key)
                outer.problems.append((fn.name, budget, problem))
            return linear_color(problem)
        return PlainSession(fn, budget, options, color)


def solve_highs(f, time_limit: float):
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    nx, ny = len(f.var_node), len(f.nodes)
    rows, cols = [], []
    r = 0
    for j, vars_ in enumerate(f.node_vars):
        rows.extend([r] * (len(vars_) + 1))
        cols.extend(vars_ + [nx + j])
        r += 1
    neq = r
    for group in f.at_most_one:
        rows.extend([r] * len(group))
        cols.extend(group)
        r += 1
    a = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(r, nx + ny)).tocsr()
    lo = np.concatenate([np.ones(neq), np.full(r - neq, -np.inf)])
    c = np.concatenate([np.zeros(nx), np.array(f.spill_cost, dtype=float)])
    t0 = time.perf_counter()
    res = milp(c, constraints=LinearConstraint(a, lo, np.ones(r)), integrality=np.ones(nx + ny),
               bounds=Bounds(0, 1), options={"time_limit": time_limit, "disp": False})
    seconds = time.perf_counter() - t0
    value = res.fun if res.x is not None else None
    return res.status == 0, value, getattr(res, "mip_dual_bound", None), seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=12)
    ap.add_argument("--stride", type=int, default=17)
    ap.add_argument("--max-instructions", type=int, default=300)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--budgets", default="15,24")
    args = ap.parse_args()
    root = corpus_root()
    if root is None:
        print("no corpus", file=sys.stderr)
        return 1
    cap = Capture()
    api.register(cap)
    files = [f for f in manifest() if f["ptxas"]["ok"]][::args.stride][:args.files]
    for entry in files:
        path = root / entry["path"]
        try:
            module = parse_file(str(path))
        except PtxallocError:
            continue
        for fn in module.functions:
            if len(CFG(fn).instrs) > args.max_instructions:
                continue
            for k in map(int, args.budgets.split(",")):
                try:
                    allocate_module(module, k, "capture", function=fn.name, verify=False)
                except PtxallocError:
                    pass
    totals = {"cpsat": [0, 0.0], "highs": [0, 0.0]}
    count = disagree = 0
    for name, k, p in cap.problems:
        f = formulate(p)
        if not f.nodes:
            continue
        heuristic = linear_color(p)
        hint = {n: heuristic.start.get(n) for n in f.nodes}
        cp = solve_cpsat(f, args.time_limit, hint)
        cp_value = sum(c for n, c in zip(f.nodes, f.spill_cost) if cp.start[n] is None)
        h_opt, h_value, h_bound, h_s = solve_highs(f, args.time_limit)
        count += 1
        totals["cpsat"][0] += cp.optimal
        totals["cpsat"][1] += cp.seconds
        totals["highs"][0] += h_opt
        totals["highs"][1] += h_s
        if cp.optimal and h_opt and abs(cp_value - h_value) > 0.5:
            disagree += 1
        print(f"{name[:40]:<40} K={k:<3} nodes={len(f.nodes):<4} vars={len(f.var_node):<6} "
              f"rows={len(f.at_most_one):<6} cpsat {'opt' if cp.optimal else 'lim'} "
              f"{cp.seconds:7.3f}s  highs {'opt' if h_opt else 'lim'} {h_s:7.3f}s", flush=True)
    print(f"{count} problems left to a solver: CP-SAT solved {totals['cpsat'][0]} in "
          f"{totals['cpsat'][1]:.1f} s, HiGHS solved {totals['highs'][0]} in "
          f"{totals['highs'][1]:.1f} s; optimal values disagree on {disagree}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
