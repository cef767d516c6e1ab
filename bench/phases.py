"""Where ``allocate``'s time goes, per phase, on given files (issue 16: profile before optimizing).

    PYTHONPATH=src python3 bench/phases.py FILE.ptx [FILE.ptx ...] [--registers K] [--repeat N]

Runs what ``ptxalloc allocate F -o OUT`` runs after start-up — parse, allocate every function
with the checker, emit — in this process, and charges the CPU time (``time.process_time``) of
each phase to its name by wrapping the phase's function: parse; the pre-passes (recompute, ...);
per function the driver's steps (prepare: legalization and the convention; analysis; coalesce;
color; spill rewriting; compaction; finish: saves, lazy spill code, slots, output); the spill
explanations and emitting; the checker (its parse of the allocated text, and the proofs, with
the pre-pass replays apart). A phase that runs inside another is charged to the inner one only
(exclusive times), so the rows add up to the total. Prints one table per file.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (module, attribute, phase): each wrapped where its callers look it up
PHASES = [
    ("ptxalloc.ptx.parser", "parse_file", "parse input"),
    ("ptxalloc.pipeline", "pre_passes", "pre-passes (recompute, ...)"),
    ("ptxalloc.alloc.driver", "_prepare", "prepare (legalize, convention, feasibility)"),
    ("ptxalloc.alloc.driver", "_max_live_as_written", "MaxLive as written"),
    ("ptxalloc.alloc.driver", "_analyse", "analysis (CFG, liveness, pressure, problem)"),
    ("ptxalloc.alloc.driver", "coalesce", "coalesce"),
    ("ptxalloc.alloc.session", "PlainSession.color", "color"),
    ("ptxalloc.alloc.choice", "evict", "second chances"),
    ("ptxalloc.alloc.driver", "_second_chances", "second chances"),
    ("ptxalloc.alloc.driver", "_spill", "spill rewriting"),
    ("ptxalloc.alloc.driver", "_compact", "compaction"),
    ("ptxalloc.alloc.driver", "_finish", "finish (saves, lazy, slots, output)"),
    ("ptxalloc.alloc.driver", "_problem", "problem (interference graph, costs)"),
    ("ptxalloc.alloc.driver", "remat_candidates", "analysis: rematerialization candidates"),
    ("ptxalloc.analysis", "CFG", "CFG, dominators, loops, frequencies"),
    ("ptxalloc.analysis", "Liveness", "liveness"),
    ("ptxalloc.analysis", "Pressure", "pressure"),
    ("ptxalloc.pipeline", "explain_spills", "spill explanations"),
    ("ptxalloc.pipeline", "emit_function", "emit"),
    ("ptxalloc.pipeline", "emit_module", "emit"),
    ("ptxalloc.verify", "parse_allocated", "checker: parse allocated text"),
    ("ptxalloc.verify", "check_no_drift", "checker: no emitter drift"),
    ("ptxalloc.verify.recompute", "recomputed_original", "checker: replay recompute"),
    ("ptxalloc.verify", "check_function", "checker: proofs"),
]

_spent: dict[str, float] = {}
_stack: list[list] = []         # [phase, start, time charged to inner phases]


def _timed(fn, phase: str):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        frame = [phase, time.process_time(), 0.0]
        _stack.append(frame)
        try:
            return fn(*args, **kwargs)
        finally:
            _stack.pop()
            total = time.process_time() - frame[1]
            _spent[phase] = _spent.get(phase, 0.0) + total - frame[2]
            if _stack:
                _stack[-1][2] += total
    return wrapper


def install() -> None:
    for module, attr, phase in PHASES:
        mod = importlib.import_module(module)
        owner, name = mod, attr
        if "." in attr:
            cls, name = attr.split(".")
            owner = getattr(mod, cls)
        setattr(owner, name, _timed(getattr(owner, name), phase))


def measure(path: str, registers) -> tuple[float, dict[str, float]]:
    from ptxalloc.ptx import parser
    from ptxalloc.pipeline import allocate_module
    _spent.clear()
    t = time.process_time()
    module = parser.parse_file(path)
    allocate_module(module, registers)
    return time.process_time() - t, dict(_spent)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--registers", default=None)
    ap.add_argument("--repeat", type=int, default=1, help="keep the fastest of N runs")
    args = ap.parse_args()
    registers = args.registers
    if registers not in (None, "seed", "auto"):
        registers = int(registers)
    install()
    for path in args.files:
        runs = [measure(path, registers) for _ in range(args.repeat)]
        total, spent = min(runs, key=lambda r: r[0])
        print(f"{Path(path).name}: {total:.3f} s CPU in process (registers={registers})")
        other = total - sum(spent.values())
        for phase, s in sorted(spent.items(), key=lambda kv: -kv[1]) + [("other", other)]:
            print(f"  {phase:48s} {s:7.3f} s  {100 * s / total:5.1f} %")


if __name__ == "__main__":
    main()
