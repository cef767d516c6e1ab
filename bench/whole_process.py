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
``--no-batch``) ``ptxalloc batch`` of the corpus's measured files in one run and of the Triton
set's in another (``--batch-jobs``, default 1; the CPU time of its workers is counted too)
against the sum of ptxas's times on them. It prints per-file ratios, median / p90 / max per
source (the corpus's top directory, ``triton`` for tests/data/triton), then each goal of the
issue for the corpus and for the Triton set beside its measured figure, and under each goal not
met its measured cause:

* the median: ptxalloc's fixed cost (``allocate`` of a one-instruction kernel) beside ptxas's
  median on the files it finishes in under 50 ms;
* the files ptxas takes 50 ms or more on: the slowest one's largest phases in process
  (``bench/phases.py``; ``--no-causes`` skips it);
* growth: the slope of log(CPU less the fixed cost) on log(lines) over the files of 1,000 lines
  or more (1.0 is linear; the goal's "near-linear" is read as at most 1.15);
* ``analyze``: ``ptxalloc parse`` of the same file alone, the front end's share;
* ``batch``: the files' allocation work (each ``allocate`` less the fixed cost), which a batch
  does not save.

Goals are printed, never asserted.

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


ONE_INSTRUCTION = """.version 7.0
.target sm_80
.address_size 64

.visible .entry one()
{
\tret;
}
"""


def group_of(row: dict) -> str:
    """The goal's two sets: the corpus (every corpus source) and the Triton set."""
    return "triton" if row["source"] == "triton" else "corpus"


def fixed_costs(ptxalloc: list[str], env: dict, tmp: str, python: str, repeat: int) -> dict:
    """CPU seconds of ``allocate`` and of ptxas on a kernel of one instruction: what every file
    pays before its first instruction (start-up, imports, the pipeline's fixed steps)."""
    src = os.path.join(tmp, "one.ptx")
    Path(src).write_text(ONE_INSTRUCTION)
    alloc = best_cpu(ptxalloc + ["allocate", src, "-o", os.path.join(tmp, "one.out.ptx")],
                     env, repeat)
    ptxas = best_cpu(["ptxas", "-arch", "sm_80", "-v", src, "-o", os.path.join(tmp, "one.cubin")],
                     env, repeat)
    return {"allocate": alloc[0], "ptxas": ptxas[0]}


def run_batch(ptxalloc: list[str], env: dict, tmp: str, label: str, members: list[dict],
              jobs: int) -> dict:
    """One ``ptxalloc batch`` of the group's files (start-up paid once), its CPU time counted
    with its workers'."""
    results = os.path.join(tmp, f"batch-{label}.jsonl")
    started = time.perf_counter()
    cpu, code, err = child_cpu(ptxalloc + ["batch", *[r["file"] for r in members], "--out",
                                           results, "--jobs", str(jobs)], env)
    wall = time.perf_counter() - started
    print(f"batch of the {len(members)} {label} files (--jobs {jobs}): {cpu:.1f} s CPU, "
          f"{wall:.1f} s wall" + (f"  (exit {code}: {err})" if code else ""), flush=True)
    return {"cpu": cpu, "wall": wall, "exit": code, "error": err, "files": len(members),
            "ptxas": sum(r["ptxas"] for r in members), "jobs": jobs}


def growth_slope(members: list[dict], key: str, fixed: float,
                 min_lines: int = 1000) -> tuple[float, int]:
    """The least-squares slope of log(``key``'s CPU - its fixed cost) against log(lines) over
    the files of at least ``min_lines`` lines (1.0: linear), and how many files it fits; the
    caller passes the files where every key it compares is above its fixed cost."""
    pts = [(math.log(r["lines"]), math.log(r[key] - fixed)) for r in members
           if r["lines"] >= min_lines]
    if len(pts) < 3:
        return math.nan, len(pts)
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return (sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else math.nan), len(pts)


def phase_profile(python: str, env: dict, path: str, top: int = 5) -> list[tuple[str, float]]:
    """The largest phases of ``allocate`` on one file, in process (bench/phases.py), as
    (phase, share of the in-process CPU time)."""
    proc = subprocess.run([python, str(Path(__file__).with_name("phases.py")), path], env=env,
                          capture_output=True, text=True)
    if proc.returncode:
        last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:]
        raise RuntimeError(f"bench/phases.py failed: {last[0] if last else proc.returncode}")
    shares = []
    for line in proc.stdout.splitlines()[1:]:
        m = re.match(r"\s+(.+?)\s+[\d.]+ s\s+([\d.]+) %$", line)
        if m:
            shares.append((m.group(1), float(m.group(2)) / 100))
    return sorted(shares, key=lambda kv: -kv[1])[:top]


def print_group_goals(label: str, members: list[dict], rows: list[dict], fixed: dict,
                      batch: dict | None, profile_with) -> dict:
    """Print one set's goals (the corpus's or the Triton set's), each beside ptxas's figure and,
    where not met, its measured cause; return the causes measured."""
    causes = {}
    title = "the corpus" if label == "corpus" else "the Triton set"
    print(f" {title} ({len(members)} files)")
    med = quantile([r["allocate_ratio"] for r in members], 0.5)
    print(f"  allocate median <= 1.0x: {med:.2f}x  {verdict(med <= 1.0)}")
    small = [r for r in members if r["ptxas"] < 0.05]
    if med > 1.0 and small:
        small_ptxas = quantile([r["ptxas"] for r in small], 0.5)
        causes["median"] = {"fixed": fixed["allocate"], "small_ptxas_median": small_ptxas}
        own = quantile([r["allocate"] - fixed["allocate"] for r in small], 0.5)
        causes["median"]["small_own_work_median"] = own
        print(f"    cause: {len(small)} of the {len(members)} files take ptxas under 50 ms "
              f"(median {1000 * small_ptxas:.1f} ms); ptxalloc's fixed cost alone (a "
              f"one-instruction kernel) is {1000 * fixed['allocate']:.1f} ms = "
              f"{fixed['allocate'] / small_ptxas:.2f}x that, these files' own work (allocate "
              f"less the fixed cost) a median {1000 * own:.1f} ms = {own / small_ptxas:.2f}x")
    heavy = [r for r in members if r["ptxas"] >= 0.05]
    if heavy:
        worst = max(heavy, key=lambda r: r["allocate_ratio"])
        n_ok = sum(r["allocate_ratio"] <= 1.0 for r in heavy)
        print(f"  allocate <= 1.0x ptxas where ptxas >= 50 ms: {n_ok}/{len(heavy)} files; median "
              f"{quantile([r['allocate_ratio'] for r in heavy], 0.5):.2f}x, worst "
              f"{worst['allocate_ratio']:.2f}x ({Path(worst['file']).name})  "
              f"{verdict(n_ok == len(heavy))}")
        if n_ok < len(heavy) and profile_with:
            try:
                shares = phase_profile(*profile_with, worst["file"])
            except RuntimeError as e:
                shares = []
                print(f"    cause: not measured ({e})")
            causes["heavy"] = {"file": worst["file"], "phases": shares}
            if shares:
                print(f"    cause: {Path(worst['file']).name} in process (bench/phases.py), "
                      f"its largest phases: "
                      + ", ".join(f"{name} {100 * share:.0f} %" for name, share in shares)
                      + f"; the fixed cost is {100 * fixed['allocate'] / worst['allocate']:.0f} %"
                        f" of its whole run")
    fit = [r for r in members if r["allocate"] > fixed["allocate"] and r["ptxas"] > fixed["ptxas"]]
    slope, fitted = growth_slope(fit, "allocate", fixed["allocate"])
    if fitted >= 3:
        biggest = max(members, key=lambda r: r["lines"])
        ptxas_slope, _ = growth_slope(fit, "ptxas", fixed["ptxas"])
        print(f"  growth near-linear in instructions (slope of log CPU on log lines over the "
              f"{fitted} files >= 1,000 lines, the fixed cost taken off; <= 1.15): {slope:.2f}, "
              f"ptxas's {ptxas_slope:.2f}  {verdict(slope <= 1.15)}; the largest, "
              f"{Path(biggest['file']).name} ({biggest['lines']:,} lines), "
              f"{biggest['allocate_ratio']:.2f}x ptxas")
        if slope > 1.15:
            causes["growth"] = {"slope": slope, "ptxas_slope": ptxas_slope}
            print(f"    cause: ptxas's own time grows with slope {ptxas_slope:.2f} on the same "
                  f"files, ptxalloc's {slope - ptxas_slope:+.2f} beyond it")
    for r in members:
        if Path(r["file"]).name in ANALYZE_GOAL_FILES and "analyze_ratio" in r:
            ok = r["analyze_ratio"] <= 0.5
            print(f"  analyze <= 0.5x ptxas on {Path(r['file']).name[:30]}: "
                  f"{r['analyze']:.2f} s / {r['ptxas']:.2f} s = {r['analyze_ratio']:.2f}x  "
                  f"{verdict(ok)}")
            if not ok and r.get("parse") is not None:
                causes.setdefault("analyze", {})[r["file"]] = r["parse"]
                print(f"    cause: `ptxalloc parse` of it alone takes {r['parse']:.2f} s = "
                      f"{r['parse'] / r['ptxas']:.2f}x ptxas (the front end); the analyses "
                      f"after it {r['analyze'] - r['parse']:.2f} s")
    total_ptxas = sum(r["ptxas"] for r in members)
    total_alloc = sum(r["allocate"] for r in members)
    print(f"  sum of allocate / sum of ptxas: {total_alloc:.1f} s / {total_ptxas:.1f} s = "
          f"{total_alloc / total_ptxas if total_ptxas else math.nan:.2f}x")
    if batch and batch["ptxas"]:
        ratio = batch["cpu"] / batch["ptxas"]
        ok = ratio <= 0.5 and batch["exit"] == 0
        print(f"  batch <= 0.5x the sum of ptxas: {batch['cpu']:.1f} s / {batch['ptxas']:.1f} s"
              f" = {ratio:.2f}x  {verdict(ok)} (wall clock with --jobs {batch['jobs']}: "
              f"{batch['wall']:.1f} s = {batch['wall'] / batch['ptxas']:.2f}x)")
        if not ok:
            work = total_alloc - len(members) * fixed["allocate"]
            causes["batch"] = {"allocate_work": work, "overhead": batch["cpu"] - work}
            print(f"    cause: the files' own allocation work (each allocate less the fixed "
                  f"cost) sums to {work:.1f} s = {work / batch['ptxas']:.2f}x ptxas, the batch's "
                  f"own cost beyond it {batch['cpu'] - work:+.1f} s: a batch saves the "
                  f"start-ups, not the allocation, which is the 1.0x goals' matter")
    return causes


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
    ap.add_argument("--no-causes", action="store_true",
                    help="skip the in-process phase profile of each group's slowest file")
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
        if path.name in ANALYZE_GOAL_FILES:
            cpu, code, err = best_cpu(ptxalloc + ["parse", str(path)], env, args.repeat)
            row["parse"] = cpu if code == 0 else None
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

    fixed = fixed_costs(ptxalloc, env, tmp, args.python, max(3, args.repeat))
    groups = [(label, [r for r in rows if group_of(r) == label and "allocate_ratio" in r])
              for label in ("corpus", "triton")]
    groups = [(label, members) for label, members in groups if members]
    batches = {}
    if not args.no_batch:
        for label, members in groups:
            batches[label] = run_batch(ptxalloc, env, tmp, label, members, args.batch_jobs)

    print("\ngoals (issue 16), CPU time beside ptxas's on the same files; each goal not met is "
          "followed by its measured cause")
    for name, figure in startup.items():
        ms = figure["cpu"] * 1000
        print(f"  ptxalloc {name:10} <= 50 ms: {ms:7.1f} ms  {verdict(ms <= 50)}")
    print(f"  (the interpreter alone {1000 * floor['python -c pass']:.1f} ms, without site "
          f"{1000 * floor['python -S -c pass']:.1f} ms; `allocate` of a one-instruction kernel "
          f"{1000 * fixed['allocate']:.1f} ms, ptxas on it {1000 * fixed['ptxas']:.1f} ms)")
    causes = {}
    for label, members in groups:
        causes[label] = print_group_goals(label, members, rows, fixed, batches.get(label),
                                          None if args.no_causes else
                                          (args.python, env))
    failures = [r for r in rows if r.get("allocate_error")]
    if failures:
        print(f"  allocate failed on {len(failures)} file(s) (listed above)")

    if args.json:
        Path(args.json).write_text(json.dumps({"startup": startup, "interpreter": floor, "files": rows,
                                               "fixed": fixed, "batch": batches,
                                               "causes": causes,
                                               "when": time.strftime("%Y-%m-%d %H:%M:%S")},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
