"""Speed as a user sees it: the whole ``ptxalloc`` process beside ``ptxas`` in one run (issue 16).

    PYTHONPATH=src python3 bench/whole_process.py                 # corpus + Triton set
    PYTHONPATH=src python3 bench/whole_process.py --files 40      # an even sample of the corpus
    PYTHONPATH=src python3 bench/whole_process.py --src /tmp/base/src --json base.json

Every figure is the CPU time (user + system) of a child process, read from
``resource.getrusage(RUSAGE_CHILDREN)`` before and after it runs, so start-up, imports, parsing,
the checker and writing the output are all counted, as they are for a user. Per input file:

* ``ptxalloc allocate F -o OUT`` (default budget: ptxas's register limit; the checker on)
  against ``ptxas -arch <target> -v F -o OUT.cubin`` (no flags: the same budget rule);
* ``ptxalloc analyze F`` against the same ptxas time, on the files named by ``--analyze``
  (default: renderer.ptx and matrix_free, the goal's files) or on every file (``--analyze all``);

and once: ``ptxalloc --version`` and ``ptxalloc parse`` of a 100-line file, and (unless
``--no-batch``) ``ptxalloc batch`` of every measured file in one run (``--batch-jobs``, default
1; the CPU time of its workers is counted too) against the sum of ptxas's times on them. It prints per-file
ratios, median / p90 / max per source (the corpus's top directory, ``triton`` for
tests/data/triton) and each goal of the issue beside its measured figure. Goals are printed,
never asserted.

As ``pip install`` does, the bench first compiles the sources to bytecode (``compileall``): with
``PYTHONDONTWRITEBYTECODE`` set (as on the project's machines) every process would otherwise
compile every module again, which no installed copy does. It also prints the interpreter's own
start-up (``python -c pass``, and without ``site``), the floor under every ptxalloc figure.
Corpus files ptxas rejects have nothing to compare with and are skipped (listed
as such); a ptxalloc failure is listed with its first line of error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, corpus_root, manifest  # noqa: E402

ANALYZE_GOAL_FILES = ("renderer.ptx", "matrix_free_device_matrix_vector_01.1.sm_80.ptx")
PARSE_FILE = REPO / "examples" / "saxpy_poly.ptx"  # 127 lines
_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.M)


def child_cpu(cmd: list[str], env: dict | None = None,
              timeout: float = 1200) -> tuple[float, int, str]:
    """(CPU seconds of the child, exit status, its last line of standard error)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, timeout=timeout)
        code, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        code, err = 124, f"timed out after {timeout:.0f} s"
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return cpu, code, (lines[-1] if lines else "")


def best_cpu(cmd, env, repeat: int) -> tuple[float, int, str]:
    runs = [child_cpu(cmd, env) for _ in range(repeat)]
    failed = [r for r in runs if r[1] != 0]
    return failed[0] if failed else min(runs)


def inputs(args) -> list[tuple[str, Path, str, int]]:
    """(source, path, ptxas arch, lines) of every file to measure."""
    out = []
    if not args.no_corpus and corpus_root() is not None:
        root = corpus_root()
        files = sorted(manifest(), key=lambda f: f["path"])
        files = [f for f in files if f["ptxas"]["ok"]]
        if args.files:
            step = max(1, len(files) / args.files)
            picked = [files[int(i * step)] for i in range(min(args.files, len(files)))]
            # the analyze goal's files are always in the sample
            picked += [f for f in files if Path(f["path"]).name in ANALYZE_GOAL_FILES
                       and f not in picked]
            files = picked
        if args.max_lines:
            files = [f for f in files if f["lines"] <= args.max_lines]
        for f in files:
            out.append((f["path"].split("/")[0], root / f["path"], f["ptxas_arch"], f["lines"]))
    if not args.no_triton:
        from ptxalloc.ptxas import arch_for
        for p in sorted((REPO / "tests" / "data" / "triton").glob("*.ptx")):
            text = p.read_text()
            m = _TARGET.search(text)
            out.append(("triton", p, arch_for(m.group(1) if m else None), text.count("\n")))
    return out


def quantile(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


def summary_line(label: str, ratios: list[float]) -> str:
    if not ratios:
        return f"  {label:12} n=0"
    return (f"  {label:12} n={len(ratios):3}  median {quantile(ratios, 0.5):6.2f}x  "
            f"p90 {quantile(ratios, 0.9):6.2f}x  max {max(ratios):6.2f}x")


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=0,
                    help="an even sample of N corpus files (sorted by path); 0: all")
    ap.add_argument("--max-lines", type=int, default=0, help="skip corpus files longer")
    ap.add_argument("--no-corpus", action="store_true")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--analyze", default="goal", choices=("goal", "all", "none"),
                    help="which files to time analyze on (default: the goal's two)")
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs of each command")
    ap.add_argument("--src", default=str(REPO / "src"),
                    help="the ptxalloc sources to measure (PYTHONPATH of the children)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", metavar="OUT.json", help="also write every figure as JSON")
    ap.add_argument("--no-batch", action="store_true", help="skip the batch goal")
    ap.add_argument("--batch-jobs", type=int, default=1, help="batch --jobs (default 1)")
    args = ap.parse_args(argv)

    env = dict(os.environ, PYTHONPATH=str(Path(args.src).resolve()))
    ptxalloc = [args.python, "-m", "ptxalloc"]
    tmp = tempfile.mkdtemp(prefix="ptxalloc-whole-")
    out_ptx, out_cubin = os.path.join(tmp, "x.ptx"), os.path.join(tmp, "x.cubin")
    subprocess.run([args.python, "-m", "compileall", "-q", env["PYTHONPATH"]], check=True)
    print(f"ptxalloc from {env['PYTHONPATH']}; CPU time (user+sys) of each child process, "
          f"best of {args.repeat}", flush=True)
    floor = {name: best_cpu([args.python, *flags, "-c", "pass"], env, 5)[0]
             for name, flags in (("python -c pass", []), ("python -S -c pass", ["-S"]))}
    for name, cpu in floor.items():
        print(f"{name:20} {cpu * 1000:7.1f} ms  (the interpreter alone)", flush=True)

    startup = {}
    for name, cmd in (("--version", ptxalloc + ["--version"]),
                      ("parse", ptxalloc + ["parse", str(PARSE_FILE)])):
        cpu, code, err = best_cpu(cmd, env, max(3, args.repeat))
        startup[name] = {"cpu": cpu, "exit": code, "error": err}
        print(f"{'ptxalloc ' + name:20} {cpu * 1000:7.1f} ms"
              + (f"  (exit {code}: {err})" if code else ""), flush=True)

    rows = []
    files = inputs(args)
    print(f"\n{'source':10} {'file':52} {'lines':>7} {'ptxas s':>8} {'alloc s':>8} "
          f"{'ratio':>7} {'analyze':>8} {'ratio':>6}", flush=True)
    for source, path, arch, lines in files:
        row = {"source": source, "file": str(path), "lines": lines, "arch": arch}
        cpu, code, err = best_cpu(["ptxas", "-arch", arch, "-v", str(path), "-o", out_cubin],
                                  env, args.repeat)
        row["ptxas"] = cpu if code == 0 else None
        if code:
            row["ptxas_error"] = err
        cpu, code, err = best_cpu(ptxalloc + ["allocate", str(path), "-o", out_ptx],
                                  env, args.repeat)
        row["allocate"] = cpu if code == 0 else None
        if code:
            row["allocate_error"] = f"exit {code}: {err}"
        if args.analyze == "all" or (args.analyze == "goal"
                                     and path.name in ANALYZE_GOAL_FILES):
            cpu, code, err = best_cpu(ptxalloc + ["analyze", str(path)], env, args.repeat)
            row["analyze"] = cpu if code == 0 else None
            if code:
                row["analyze_error"] = f"exit {code}: {err}"
        if row["ptxas"] and row["allocate"] is not None:
            row["allocate_ratio"] = row["allocate"] / row["ptxas"]
        if row["ptxas"] and row.get("analyze") is not None:
            row["analyze_ratio"] = row["analyze"] / row["ptxas"]
        rows.append(row)

        def fmt(v, spec):
            return format(v, spec) if v is not None else "-"
        name = str(path.relative_to(corpus_root()) if source != "triton" else path.name)
        print(f"{source:10} {name[-52:]:52} {lines:7} {fmt(row['ptxas'], '8.3f')} "
              f"{fmt(row['allocate'], '8.3f')} {fmt(row.get('allocate_ratio'), '6.2f')}x "
              f"{fmt(row.get('analyze'), '8.3f')} {fmt(row.get('analyze_ratio'), '5.2f')}x"
              + (f"  {row.get('allocate_error') or row.get('ptxas_error')}"
                 if row.get("allocate_error") or row.get("ptxas_error") else ""), flush=True)

    ratios = [r["allocate_ratio"] for r in rows if "allocate_ratio" in r]
    print("\nallocate / ptxas (CPU time ratio) by source:")
    for source in sorted({r["source"] for r in rows}):
        print(summary_line(source, [r["allocate_ratio"] for r in rows
                                    if r["source"] == source and "allocate_ratio" in r]))
    print(summary_line("all", ratios))
    corpus_ratios = [r["allocate_ratio"] for r in rows
                     if r["source"] != "triton" and "allocate_ratio" in r]
    heavy = [r for r in rows if "allocate_ratio" in r and r["ptxas"] >= 0.05]
    failures = [r for r in rows if r.get("allocate_error")]
    total_ptxas = sum(r["ptxas"] for r in rows if "allocate_ratio" in r)
    total_alloc = sum(r["allocate"] for r in rows if "allocate_ratio" in r)

    batch = None
    if not args.no_batch:
        measured = [r for r in rows if "allocate_ratio" in r]
        results = os.path.join(tmp, "batch.jsonl")
        cpu, code, err = child_cpu(ptxalloc + ["batch", *[r["file"] for r in measured], "--out",
                                               results, "--jobs", str(args.batch_jobs)], env)
        batch = {"cpu": cpu, "exit": code, "error": err, "files": len(measured),
                 "ptxas": sum(r["ptxas"] for r in measured), "jobs": args.batch_jobs}
        print(f"\nbatch of the {len(measured)} files (--jobs {args.batch_jobs}): {cpu:.1f} s"
              + (f"  (exit {code}: {err})" if code else ""), flush=True)

    print("\ngoals (issue 16):")
    for name, figure in startup.items():
        ms = figure["cpu"] * 1000
        print(f"  ptxalloc {name:10} <= 50 ms: {ms:7.1f} ms  {verdict(ms <= 50)}")
    if heavy:
        worst = max(heavy, key=lambda r: r["allocate_ratio"])
        n_ok = sum(r["allocate_ratio"] <= 1.0 for r in heavy)
        print(f"  allocate <= 1.0x ptxas where ptxas >= 50 ms: {n_ok}/{len(heavy)} files; worst "
              f"{worst['allocate_ratio']:.2f}x ({Path(worst['file']).name})  "
              f"{verdict(n_ok == len(heavy))}")
    if corpus_ratios:
        med = quantile(corpus_ratios, 0.5)
        print(f"  allocate median over the corpus <= 1.0x: {med:.2f}x  {verdict(med <= 1.0)}")
        small = [r for r in rows if r["source"] != "triton" and "allocate_ratio" in r
                 and r["ptxas"] < 0.05]
        if small:
            print(f"    (start-up: the {len(small)} corpus files where ptxas takes under 50 ms, "
                  f"median {1000 * quantile([r['allocate'] for r in small], 0.5):.1f} ms "
                  f"against ptxas's {1000 * quantile([r['ptxas'] for r in small], 0.5):.1f} ms; "
                  f"the interpreter alone {1000 * floor['python -c pass']:.1f} ms)")
    for r in rows:
        if Path(r["file"]).name in ANALYZE_GOAL_FILES and "analyze_ratio" in r:
            print(f"  analyze <= 0.5x ptxas on {Path(r['file']).name[:30]}: "
                  f"{r['analyze']:.2f} s / {r['ptxas']:.2f} s = {r['analyze_ratio']:.2f}x  "
                  f"{verdict(r['analyze_ratio'] <= 0.5)}")
    print(f"  sum of allocate CPU / sum of ptxas CPU: {total_alloc:.1f} s / {total_ptxas:.1f} s"
          f" = {total_alloc / total_ptxas if total_ptxas else math.nan:.2f}x")
    if batch and batch["ptxas"]:
        ratio = batch["cpu"] / batch["ptxas"]
        print(f"  batch <= 0.5x the sum of ptxas: {batch['cpu']:.1f} s / {batch['ptxas']:.1f} s"
              f" = {ratio:.2f}x  {verdict(ratio <= 0.5 and batch['exit'] == 0)}")
    if failures:
        print(f"  allocate failed on {len(failures)} file(s) (listed above)")

    if args.json:
        Path(args.json).write_text(json.dumps({"startup": startup, "interpreter": floor, "files": rows,
                                               "batch": batch,
                                               "when": time.strftime("%Y-%m-%d %H:%M:%S")},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
