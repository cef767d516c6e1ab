"""Where a ``ptxalloc batch`` run's time goes beyond the per-file work (issue 16).

    python3 bench/batch_overhead.py                  # the 50 files of whole_process --files 40
    python3 bench/batch_overhead.py --files 0        # every corpus file ptxas accepts
    python3 bench/batch_overhead.py --analyze        # batch --analyze instead

Runs :func:`ptxalloc.batch.run_batch` in this process with one job (the files one after the
other, as ``--jobs 1``), on the files ``bench/whole_process.py`` measures with the same
``--files``, and charges its CPU time (``time.process_time``) to: the parse, the allocation
(``pipeline.allocate_module``) and within it the checker (``verify.verify_module_text``), or
under ``--analyze`` the analyze rows; the report rows; the JSON lines and their writing; and
what is left (the batch loop itself: resume bookkeeping, the summary). It prints the loop's
total beside the sum of the per-file ``seconds`` the closing lines record. Start-up is not in
it: ``bench/whole_process.py`` times the whole ``batch`` process beside ptxas.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import whole_process  # noqa: E402


def timed(table: dict[str, float], key: str, fn):
    """``fn`` with its CPU time added to ``table[key]``."""
    def run(*args, **kwargs):
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            table[key] += time.process_time() - start
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=40,
                    help="whole_process's even sample of N corpus files (0: all)")
    ap.add_argument("--analyze", action="store_true", help="batch --analyze")
    args = ap.parse_args(argv)
    from ptxalloc import batch, pipeline, ptx, verify
    from ptxalloc.report import analysis_report

    picked = whole_process.inputs(argparse.Namespace(no_corpus=False, files=args.files,
                                                     max_lines=0, no_triton=False))
    files = [str(p) for _, p, _, _ in picked]
    spent = dict.fromkeys(("parse", "allocate", "  of it the checker", "analyze rows",
                           "report rows", "JSON lines + write"), 0.0)
    ptx.parse_file = timed(spent, "parse", ptx.parse_file)
    verify.verify_module_text = timed(spent, "  of it the checker", verify.verify_module_text)
    allocate = timed(spent, "allocate", pipeline.allocate_module)

    def allocate_module(*a, **k):
        result = allocate(*a, **k)
        for fr in result.functions:
            fr.report = timed(spent, "report rows", fr.report)
        return result

    pipeline.allocate_module = allocate_module
    batch._analyze_rows = timed(spent, "analyze rows", batch._analyze_rows)
    batch._append = timed(spent, "JSON lines + write", batch._append)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "batch.jsonl")
        start = time.process_time()
        summary = batch.run_batch(files, out, batch.BatchOptions(analyze=args.analyze),
                                  progress=False)
        total = time.process_time() - start
        size = os.path.getsize(out)
    if args.analyze:
        spent.pop("allocate")
        spent.pop("  of it the checker")
        spent.pop("report rows")
    else:
        spent.pop("analyze rows")
    charged = sum(v for k, v in spent.items() if not k.startswith(" "))
    print(f"batch{' --analyze' if args.analyze else ''} of {len(files)} files "
          f"({summary.functions} functions, {size / 1e6:.1f} MB of JSON lines), one job")
    print(f"  the batch loop: {total:8.3f} s CPU; the closing lines' seconds sum to "
          f"{summary.seconds:.3f} s")
    for key, value in spent.items():
        print(f"  {key:22} {value:8.3f} s  {100 * value / total:5.1f} %")
    print(f"  {'the rest':22} {total - charged:8.3f} s  {100 * (total - charged) / total:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
