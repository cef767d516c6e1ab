"""Start-up A/B (issue 16): one ``ptxalloc`` command run in fresh processes from several source
trees in turn, printing each tree's median and least CPU time (user + system of the child).

    PYTHONPATH=src python3 bench/startup.py --src /tmp/base/src --src src --runs 21 -- \\
        allocate ../shared/corpus/zluda/ptx/src/test/spirv_run/fmax.ptx -o /tmp/x.ptx
    PYTHONPATH=src python3 bench/startup.py --src /tmp/base/src --src src --runs 5 \\
        --files 40 -- allocate {} -o /tmp/x.ptx

The trees take turns run by run, so a change of the machine's load falls on all of them alike
(``git archive COMMIT src | tar -x -C DIR`` makes a tree of a commit). The sources are compiled
to bytecode first, as :mod:`whole_process` does. Without ``--src``: the working tree's.

``--files N``: the command is run on each small file of :mod:`whole_process`'s ``--files N``
sample of the corpus (those whose functions ptxas compiled in under 50 ms in all, by the
manifest's ``compile_ms``), ``{}`` in the command standing for the file; per tree it prints the
median over the files of each file's median, and the least of them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO  # noqa: E402
from whole_process import child_cpu  # noqa: E402

SMALL_MS = 50       # ptxas's own compile time under which a file counts as small (whole_process)


def small_files(n: int) -> list[str]:
    """The files of whole_process's ``--files n`` sample where ptxas took under 50 ms."""
    from whole_process import inputs

    picked = inputs(argparse.Namespace(no_corpus=False, no_triton=True, files=n, max_lines=0))
    from common import corpus_root, manifest
    root = corpus_root()
    ms = {str(root / f["path"]): sum(fn.get("compile_ms", 0) for fn in f["ptxas"]["functions"])
          for f in manifest()}
    return [str(p) for _, p, _, _ in picked if ms.get(str(p), SMALL_MS) < SMALL_MS]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", help="a ptxalloc source tree (repeatable)")
    ap.add_argument("--runs", type=int, default=21, help="runs of each tree (default 21)")
    ap.add_argument("--files", type=int, default=0,
                    help="run the command ('{}': the file) on the small files of an even "
                         "sample of N corpus files")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="the ptxalloc arguments, after '--'")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the ptxalloc command after '--'")
    if args.files and "{}" not in command:
        ap.error("with --files, write {} in the command where the file goes")
    trees = [str(Path(s).resolve()) for s in (args.src or [str(REPO / "src")])]
    for tree in trees:
        subprocess.run([args.python, "-m", "compileall", "-q", tree], check=True)
    files = small_files(args.files) if args.files else [None]
    # per tree, per file: the CPU ms of each run
    cpu: dict[str, list[list[float]]] = {tree: [[] for _ in files] for tree in trees}
    for _ in range(args.runs):
        for i, path in enumerate(files):
            argv_ = [path if (a == "{}" and path) else a for a in command]
            for tree in trees:
                seconds, code, err = child_cpu([args.python, "-m", "ptxalloc", *argv_],
                                               dict(os.environ, PYTHONPATH=tree))
                if code:
                    raise SystemExit(f"{tree}: exit {code}: {err}")
                cpu[tree][i].append(seconds * 1000)
    if args.files:
        print(f"ptxalloc {' '.join(command)}: CPU ms on {len(files)} small files, {args.runs} "
              f"runs each, trees in turn; the median over the files of each file's median")
        for tree, per_file in cpu.items():
            medians = [statistics.median(ms) for ms in per_file]
            print(f"  {tree:50} median {statistics.median(medians):6.1f}  "
                  f"min {min(min(ms) for ms in per_file):6.1f}")
        return 0
    print(f"ptxalloc {' '.join(command)}: CPU ms over {args.runs} runs each, trees in turn")
    for tree, (ms,) in cpu.items():
        print(f"  {tree:50} median {statistics.median(ms):6.1f}  min {min(ms):6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
