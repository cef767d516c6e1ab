"""Mutation fuzzing of ptxalloc's input handling against ptxas (issue 11).

    python3 bench/fuzz_inputs.py [--mutants 500] [--seed 1] [--jobs 2] [--timeout 20]
                                 [--files GLOB] [--max-size 60000] [--out fuzz_inputs_out]
    python3 bench/fuzz_inputs.py --seed 1 --index 137 --out DIR      # one mutant again

Each mutant is a real PTX file (a corpus file under ``--max-size`` bytes that ptxas accepts, or
one of tests/data) changed by one operator of ``tests/fuzz_mutations.py``. ptxas (``-arch`` of
the source file, as MANIFEST.json gives it) says whether the mutant is PTX; ``ptxalloc
allocate`` runs in a subprocess under ``--timeout`` at ``--registers 15`` (255 for a quarter of
the mutants) with either allocator. The outcome is one of:

bugs
  internal_error    exit 3 or a Python traceback on stderr (or death by a signal)
  hang              ptxalloc ran past --timeout
  refused_valid     ptxas accepts, ptxalloc exits 2 (not for an impossible budget)
  proof_failure     exit 1: the allocation failed its own proof
  silent_accept     ptxas rejects, ptxalloc exits 0 with nothing on stderr
  missed_function   ptxas accepts and compiles a function that ptxalloc (exit 0) did not
                    allocate: a silent mis-parse (a one-line module is all ``.version``)
  output_rejected   ptxas accepts the input and rejects ptxalloc's output
fine
  allocated         ptxas accepts, ptxalloc allocates and ptxas assembles the output
  impossible_budget ptxas accepts, ptxalloc refuses: an instruction needs more than K registers
  rejected_both     ptxas rejects, ptxalloc exits 2
  accepted_warned   ptxas rejects, ptxalloc exits 0 but says something on stderr
  ptxas_timeout     ptxas itself ran past --timeout (no verdict)

Counts are printed per class, per operator, with rates; each bug-class mutant is written to
``--out`` with a comment header (class, operator, source, seed, index and the commands that
reproduce it); ``--out``/results.jsonl has one line per mutant. A run is a pure function of its seed (and the sources), whatever ``--jobs``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "bench")]

import fuzz_mutations as fm                                   # noqa: E402
from common import corpus_root, manifest                      # noqa: E402
from ptxalloc import ptxas                                    # noqa: E402

BUGS = ("internal_error", "hang", "refused_valid", "proof_failure", "silent_accept",
        "missed_function", "output_rejected")
FINE = ("allocated", "impossible_budget", "rejected_both", "accepted_warned", "ptxas_timeout")
_NEEDS = re.compile(r"needs (\d+(?:\.\d+)?) registers at once")
_TARGET = re.compile(r"^[ \t]*\.target[ \t]+(\w+)", re.M)


def load_sources(pattern: str | None, max_size: int) -> list[tuple[str, str, str]]:
    """(name, text, ptxas arch) of every source file: the corpus files ptxas accepts under
    ``max_size`` bytes and tests/data/**/*.ptx, filtered by the glob ``pattern``."""
    out = []
    root = corpus_root()
    if root is not None:
        for f in manifest():
            path = root / f["path"]
            if f["ptxas"]["ok"] and path.stat().st_size <= max_size:
                out.append((f"corpus/{f['path']}", path, f["ptxas_arch"]))
    for path in sorted((ROOT / "tests" / "data").glob("**/*.ptx")):
        if path.stat().st_size <= max_size:
            text = fm.read_ptx(path)
            m = _TARGET.search(text)
            out.append((str(path.relative_to(ROOT)), path, ptxas.arch_for(m and m.group(1))))
    if pattern:
        out = [s for s in out if fnmatch.fnmatch(s[0], pattern)]
    return [(name, fm.read_ptx(path), arch) for name, path, arch in out]


_SOURCES: list[tuple[str, str, str]] = []


def _init(sources) -> None:
    global _SOURCES
    _SOURCES = sources


def _run_settings(seed: int, index: int) -> tuple[int, str]:
    """The budget and allocator of mutant ``index``: K = 255 for a quarter, either allocator."""
    import random
    rng = random.Random(f"{seed}:{index}:run")
    return (255 if rng.random() < 0.25 else 15), rng.choice(("briggs", "fatpoint"))


def classify(ptxas_ok: bool | None, rc: int | None, stderr: str, budget: int,
             output_ok: bool | None, missed: set[str] = frozenset()) -> str:
    if ptxas_ok is None:
        return "ptxas_timeout"
    if rc is None:
        return "hang"
    if rc == 3 or rc < 0 or "Traceback (most recent call last)" in stderr or rc not in (0, 1, 2):
        return "internal_error"
    if rc == 1:
        return "proof_failure"
    if rc == 2:
        if not ptxas_ok:
            return "rejected_both"
        m = _NEEDS.search(stderr)
        return "impossible_budget" if m and float(m.group(1)) > budget else "refused_valid"
    if not ptxas_ok:
        return "accepted_warned" if stderr.strip() else "silent_accept"
    if missed:
        return "missed_function"
    return "allocated" if output_ok in (True, None) else "output_rejected"


def _commands(path: str, arch: str, budget: int, allocator: str) -> list[str]:
    return [f"ptxas -arch={arch} {path} -o /dev/null",
            f"PYTHONPATH=src python3 -m ptxalloc allocate {path} --registers {budget} "
            f"--allocator {allocator} -o /tmp/out.ptx"]


def run_one(seed: int, index: int, timeout: float, check_output: bool, out_dir: str,
            operators: list[str] | None) -> dict:
    """Make mutant ``index``, judge it with ptxas and ptxalloc, keep it if it is a bug."""
    sources = [(name, text) for name, text, _ in _SOURCES]
    mutant = fm.make_mutant(seed, index, sources, operators)
    arch = next(a for name, _, a in _SOURCES if name == mutant.source)
    budget, allocator = _run_settings(seed, index)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ptxalloc-fuzz-") as tmp:
        src = os.path.join(tmp, f"mutant_{index}.ptx")
        dst = os.path.join(tmp, "out.ptx")
        report_json = os.path.join(tmp, "report.json")
        with open(src, "wb") as f:
            f.write(fm.to_bytes(mutant.text))
        r = ptxas.assemble_file(src, arch, timeout=timeout)
        ptxas_ok = None if r.output == "ptxas timed out" else r.ok
        cmd = [sys.executable, "-m", "ptxalloc", "allocate", src, "--registers", str(budget),
               "--allocator", allocator, "-o", dst, "--json", report_json]
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        env.pop("PTXALLOC_DEBUG", None)
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
            rc, stderr = proc.returncode, proc.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            rc, stderr = None, f"timed out after {timeout:g} s"
        output_ok, missed = None, set()
        if rc == 0 and ptxas_ok:
            with open(report_json) as f:
                allocated = {row["name"] for row in json.load(f)["functions"]}
            missed = set(r.functions) - allocated
            if check_output:
                output_ok = ptxas.assemble_file(dst, arch, timeout=timeout).ok
    verdict = classify(ptxas_ok, rc, stderr, budget, output_ok, missed)
    if missed:
        stderr += f"\nnot allocated: {', '.join(sorted(missed)[:5])}"
    message = stderr.strip().splitlines()[-1][:300] if stderr.strip() else ""
    saved = None
    if verdict in BUGS:
        saved = os.path.join(out_dir, verdict, f"{mutant.operator}_{index}.ptx")
        os.makedirs(os.path.dirname(saved), exist_ok=True)
        header = [f"// ptxalloc fuzz_inputs: {verdict}", f"// operator: {mutant.operator}",
                  f"// source: {mutant.source}", f"// seed {seed}, index {index}: "
                  f"python3 bench/fuzz_inputs.py --seed {seed} --index {index}",
                  f"// ptxas {'accepts' if ptxas_ok else 'rejects'}; ptxalloc exit {rc}: "
                  f"{message}"]
        header += [f"// reproduce: {c}" for c in _commands(saved, arch, budget, allocator)]
        with open(saved, "wb") as f:
            f.write(fm.to_bytes("\n".join(header) + "\n" + mutant.text))
    return {"index": index, "operator": mutant.operator, "source": mutant.source,
            "verdict": verdict, "rc": rc, "message": message, "saved": saved,
            "seconds": time.perf_counter() - t0}


def report(results: list[dict], wall: float, jobs: int) -> None:
    n = len(results)
    by_class = Counter(r["verdict"] for r in results)
    print(f"{n} mutants in {wall:.0f} s ({wall / max(n, 1) * jobs:.2f} s per mutant per job, "
          f"{jobs} jobs)")
    for group, names in (("bugs", BUGS), ("fine", FINE)):
        total = sum(by_class[c] for c in names)
        print(f"{group}: {total} ({100 * total / max(n, 1):.1f} %)")
        for c in names:
            print(f"  {c:18} {by_class[c]:6}  {100 * by_class[c] / max(n, 1):5.1f} %")
    per_op: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        per_op[r["operator"]][r["verdict"]] += 1
    short = {"internal_error": "internal", "refused_valid": "refused", "proof_failure": "proof",
             "silent_accept": "silent", "missed_function": "missed",
             "output_rejected": "out_rej"}
    cols = list(BUGS)
    print(f"\n{'operator':24}{'n':>6}" + "".join(f"{short.get(c, c):>10}" for c in cols)
          + f"{'bug rate':>10}")
    for op in fm.OPERATORS:
        if op not in per_op:
            continue
        c = per_op[op]
        total = sum(c.values())
        bugs = sum(c[b] for b in BUGS)
        print(f"{op:24}{total:6}" + "".join(f"{c[b]:10}" for b in cols)
              + f"{100 * bugs / total:9.1f}%")
    slowest = max(results, key=lambda r: r["seconds"], default=None)
    if slowest:
        print(f"\nslowest mutant: index {slowest['index']} ({slowest['operator']} of "
              f"{slowest['source']}), {slowest['seconds']:.1f} s, {slowest['verdict']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutants", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--timeout", type=float, default=20.0,
                    help="seconds per ptxas or ptxalloc run before it counts as a hang")
    ap.add_argument("--files", metavar="GLOB", help="only sources whose name matches, e.g. "
                    "'corpus/triton*' or 'tests/data/*'")
    ap.add_argument("--max-size", type=int, default=60_000,
                    help="largest source file in bytes (default 60000)")
    ap.add_argument("--operators", help="comma-separated operators (default: all)")
    ap.add_argument("--index", type=int, help="run only this mutant of the seed and say why")
    ap.add_argument("--no-output-check", action="store_true",
                    help="do not assemble ptxalloc's output with ptxas")
    ap.add_argument("--out", default="fuzz_inputs_out", help="where bug-class mutants go")
    args = ap.parse_args(argv)
    if not ptxas.available():
        raise SystemExit("ptxas is not on the PATH: it is the fuzzer's oracle")
    operators = args.operators.split(",") if args.operators else None
    unknown = [op for op in operators or [] if op not in fm.OPERATORS]
    if unknown:
        raise SystemExit(f"unknown operator(s) {', '.join(unknown)}; known: "
                         f"{', '.join(fm.OPERATORS)}")
    sources = load_sources(args.files, args.max_size)
    if not sources:
        raise SystemExit("no source files (is ../shared/corpus there? does --files match?)")
    check_output = not args.no_output_check
    if args.index is not None:
        _init(sources)
        r = run_one(args.seed, args.index, args.timeout, check_output, args.out, operators)
        print(f"mutant {r['index']}: {r['operator']} of {r['source']}: {r['verdict']} "
              f"(exit {r['rc']}) {r['message']}" + (f"\nwritten to {r['saved']}"
                                                      if r["saved"] else ""))
        return 0
    print(f"{len(sources)} source files, {len(operators or fm.OPERATORS)} operators, "
          f"seed {args.seed}", flush=True)
    start = time.monotonic()
    results = []
    with ProcessPoolExecutor(args.jobs, initializer=_init, initargs=(sources,)) as pool:
        futures = [pool.submit(run_one, args.seed, i, args.timeout, check_output, args.out,
                               operators) for i in range(args.mutants)]
        for done, fut in enumerate(futures, 1):
            r = fut.result()
            results.append(r)
            if r["saved"]:
                print(f"{r['verdict']}: {r['operator']} of {r['source']}: {r['message'][:160]}"
                      f" -> {r['saved']}", flush=True)
            if done % 250 == 0:
                print(f"... {done} mutants, {time.monotonic() - start:.0f} s", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.jsonl"), "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    print()
    report(results, time.monotonic() - start, args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
