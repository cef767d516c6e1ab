"""End-to-end ``allocate`` CPU time per corpus file next to ptxas's CPU time on the same file
in the same run, at K = 15 and K = 255 (issue: the CICC allocator end to end), with the figures of
the allocations: functions allocated or refused, spill bytes, moves coalesced, how often the
registers used equal MaxLive (the lower bound for the values as the program names them;
coalescing can go below it), and for the functions above it, what kind they are.

"End to end" is what ``ptxalloc allocate`` does after the interpreter has started: parse,
allocate every function, emit, and check every allocation with the independent checker.
Python's own start-up is measured once and printed apart.

Every figure is CPU time (user + system): ptxalloc's is this process's own
(``time.process_time``) around the work, ptxas's that of the child process
(``getrusage(RUSAGE_CHILDREN)``, best of one run per budget), so the ratios keep their meaning
when other processes load the machine (wall time grows with the load, CPU time far less).

Targets: median ratio at most 1.0; registers equal to MaxLive on at least 95 % of functions at
K = 255.

    python3 bench/allocate.py [--budgets 15,255,default] [--allocator briggs] [--no-verify]
                              [--files N]

ptxas gets the budget ptxalloc gets (bench/common.py): ``-maxrregcount K
--override-directive-values`` for a number K, no flag for ``default`` (ptxas's register limit,
ptxalloc's default).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from common import (budget_name, children_cpu, corpus_root, manifest, median, parse_budgets,
                    ptxas_budget_flags, ptxas_cpu_seconds)

from ptxalloc.errors import AllocationError
from ptxalloc.ir.operands import Vec
from ptxalloc.pipeline import allocate_module, allocate_what_fits
from ptxalloc.ptx import parse_file


def run(path: str, budget: int | None, allocator: str, verify: bool):
    """Parse and allocate a file end to end; the time of a file with a refused function (an
    instruction needs more than the budget) is that of the run without it. Returns (CPU seconds,
    result, module allocated, {refused function: message})."""
    t = time.process_time()
    module = parse_file(path)
    try:
        result = allocate_module(module, budget, allocator, verify=verify)
        return time.process_time() - t, result, module, {}
    except AllocationError:
        pass
    _, kept, refused = allocate_what_fits(module, budget, allocator, verify=False)
    t = time.process_time()
    module = parse_file(path).without(set(refused))
    result = allocate_module(module, budget, allocator, verify=verify)
    return time.process_time() - t, result, kept, refused


def gap_kind(fn, fr) -> str:
    """Why a function uses more registers than MaxLive: it makes calls (values live across
    them sit in callee-saved R24-R30), it holds register tuples, or it is a leaf .func (its
    parameters bound to R0-R7); else a leaf kernel."""
    if fr.extra.get("convention", {}).get("calls"):
        return "makes calls"
    if any(type(op) is Vec for ins in fn.instructions() for op in ins.ops):
        return "leaf, register tuples"
    return "leaf .func, no tuples" if fn.kind == "func" else "leaf kernel, no tuples"


def main() -> int:
    from ptxalloc.alloc import api
    ap = argparse.ArgumentParser()
    ap.add_argument("--budgets", default="15,255,default")
    ap.add_argument("--allocator", default="briggs", choices=api.names())
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--files", type=int, default=0, help="only the first N files")
    ap.add_argument("--per-file", action="store_true", help="print a row per file")
    a = ap.parse_args()
    root = corpus_root()
    files = [f for f in manifest() if f["ptxas"]["ok"]]
    if a.files:
        files = files[:a.files]
    t = children_cpu()
    subprocess.run([sys.executable, "-c", "import ptxalloc.cli"], check=True)
    startup = children_cpu() - t
    print(f"python start-up + import of ptxalloc.cli: {1000 * startup:.0f} ms CPU (not in the "
          f"ratios)")
    for budget in parse_budgets(a.budgets):
        px = {f["path"]: ptxas_cpu_seconds(str(root / f["path"]), f["ptxas_arch"],
                                           ptxas_budget_flags(budget), repeat=1)
              for f in files}
        ratios = []
        ours_total = theirs_total = 0.0
        funcs = refused = spill = moves = coalesced = at_bound = below = optimal = 0
        verified = 0
        above: dict[str, list[int]] = {}          # kind -> [functions, proven minimal]
        for f in files:
            secs, result, module, refusals = run(str(root / f["path"]), budget, a.allocator,
                                                 not a.no_verify)
            refused += len(refusals)
            theirs = px[f["path"]]
            ours_total += secs
            if theirs:
                theirs_total += theirs
                ratios.append(secs / theirs)
            fns = {fn.name: fn for fn in module.functions}
            for fr in result.functions:
                funcs += 1
                if fr.registers > fr.max_live_legalized:
                    got = above.setdefault(gap_kind(fns[fr.name], fr), [0, 0])
                    got[0] += 1
                    got[1] += bool(fr.extra.get("registers_optimal"))
                spill += fr.spill_stores_bytes + fr.spill_loads_bytes
                moves += fr.moves
                coalesced += fr.moves_coalesced
                at_bound += fr.registers == fr.max_live_legalized
                below += fr.registers <= fr.max_live_legalized
                optimal += bool(fr.extra.get("registers_optimal"))
                verified += fr.verified is True
            if a.per_file:
                print(f"  {budget_name(budget)} {f['path']:<80} {secs:7.3f} s CPU  ptxas "
                      f"{theirs if theirs else float('nan'):7.3f} s")
        print(f"\n{budget_name(budget)} ({a.allocator}): {len(files)} files, {funcs} functions "
              f"allocated, {refused} refused (an instruction needs more than the budget)")
        print(f"  functions {funcs}, verified {verified}, spill bytes (stores+loads) {spill}, "
              f"moves coalesced {coalesced} of {moves}")
        print(f"  CPU time: ptxalloc {ours_total:.1f} s, ptxas {theirs_total:.1f} s; per-file ratio "
              f"median {median(ratios):.2f}, mean {sum(ratios) / max(len(ratios), 1):.2f}, "
              f"files at most 1.0: {sum(r <= 1.0 for r in ratios)} of {len(ratios)}")
        if funcs:
            print(f"  registers == MaxLive: {at_bound} ({100 * at_bound / funcs:.1f} %), "
                  f"<= MaxLive: {below} ({100 * below / funcs:.1f} %), register count proven "
                  f"minimal for the final graph: {optimal} ({100 * optimal / funcs:.1f} %)")
            print(f"  above MaxLive: {sum(n for n, _ in above.values())} functions: " + "; ".join(
                f"{kind} {n} ({proven} proven minimal)"
                for kind, (n, proven) in sorted(above.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
