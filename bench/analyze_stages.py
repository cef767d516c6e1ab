"""Where `ptxalloc analyze`'s time goes, stage by stage (issue 16): in-process CPU time of
analyze's work on whole files, best of ``--repeat`` runs, charged to the parse, the CFG,
liveness, tuples, pressure, and the report row split into the interference statistics, the
line pressure and the rest (peak values, their costs, "what to change"), then the text.
Start-up and imports are not counted (``bench/whole_process.py`` times the whole process).
It reads only interfaces every branch since issue 16's third round has, so ``--src`` compares
two branches with one probe:

    python3 bench/analyze_stages.py                       # renderer.ptx and matrix_free
    python3 bench/analyze_stages.py FILE... --src /tmp/base/src
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from time import process_time

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, corpus_root  # noqa: E402

FILES = ["gpuocelot/tests/ptx/unstructured/renderer.ptx",
         "ptx90parser/tests/sample/matrix_free_device_matrix_vector_01.1.sm_80.ptx"]
STAGES = ("parse", "cfg", "liveness", "tuples", "pressure", "interference", "line pressure",
          "peak values, costs, what to change", "text")


def stages(path: str) -> dict[str, float]:
    """One run of analyze's work on ``path``: CPU seconds per stage."""
    from ptxalloc.analysis import FunctionAnalysis
    from ptxalloc.analysis.costs import memory_latency
    from ptxalloc.analysis.line_pressure import line_pressure
    from ptxalloc.analysis.liveness import Liveness
    from ptxalloc.analysis.pressure import Pressure
    from ptxalloc.analysis.sources import source_files
    from ptxalloc.analysis.static_shared import own_static_shared
    from ptxalloc.analysis.tuples import find_tuples
    from ptxalloc.ir.cfg import CFG
    from ptxalloc.pipeline import fixed_budgets
    from ptxalloc.ptx import parse_file
    from ptxalloc.report.analysis_report import format_text, function_row
    from ptxalloc.target.occupancy import block_size
    from ptxalloc.target.sm import profile_for_module
    from ptxalloc.util import gc_paused

    took = dict.fromkeys(STAGES, 0.0)

    def timed(stage, f, *args):
        t = process_time()
        out = f(*args)
        took[stage] += process_time() - t
        return out

    module = timed("parse", parse_file, path)
    sm = profile_for_module(None, module)
    budgets = fixed_budgets(module, sm, None)
    files = source_files(module)
    decls = module.declarations()
    rows = []
    with gc_paused():           # as analyze's own analyses run
        for fn in module.functions:
            cfg = timed("cfg", CFG, fn)
            liveness = timed("liveness", Liveness, cfg)
            tuples = timed("tuples", find_tuples, fn, cfg.instrs)
            pressure = timed("pressure", Pressure, cfg, liveness, tuples, 0)

            def fresh():
                return FunctionAnalysis(fn, cfg, liveness, tuples, None, pressure,
                                        memory_latency(sm, pressure.max_regs,
                                                       block_size(fn.directives)))

            before = (took["interference"], took["line pressure"])
            timed("interference", lambda a: a.graph.statistics(), fresh())
            timed("line pressure", line_pressure, cfg, pressure, files, 5)
            again = took["interference"] - before[0] + took["line pressure"] - before[1]
            static_shared = own_static_shared(fn, decls)
            t = process_time()
            rows.append(function_row(fresh(), sm, budgets[fn.name].registers, files=files,
                                     static_shared=static_shared))
            # the row builds the graph and the line pressure again: charged once, above
            took["peak values, costs, what to change"] += process_time() - t - again
        timed("text", format_text, rows, sm, path, 12)
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--src", default=str(REPO / "src"), help="the ptxalloc sources to time")
    args = ap.parse_args()
    sys.path.insert(0, args.src)
    files = args.files
    if not files:
        root = corpus_root()
        if root is None:
            print("../shared/corpus is absent: name the files to measure")
            return 1
        files = [str(root / f) for f in FILES]
    for path in files:
        best = min((stages(path) for _ in range(args.repeat)), key=lambda d: sum(d.values()))
        print(f"{Path(path).name}: {sum(best.values()):.3f} s")
        for stage in STAGES:
            print(f"  {stage:36s} {best[stage]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
