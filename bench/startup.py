"""Start-up A/B (issue 16): one ``ptxalloc`` command run in fresh processes from several source
trees in turn, printing each tree's median and least CPU time (user + system of the child).

    PYTHONPATH=src python3 bench/startup.py --src /tmp/base/src --src src --runs 21 -- \\
        allocate ../shared/corpus/zluda/ptx/src/test/spirv_run/fmax.ptx -o /tmp/x.ptx

The trees take turns run by run, so a change of the machine's load falls on all of them alike
(``git archive COMMIT src | tar -x -C DIR`` makes a tree of a commit). The sources are compiled
to bytecode first, as :mod:`whole_process` does. Without ``--src``: the working tree's.
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", help="a ptxalloc source tree (repeatable)")
    ap.add_argument("--runs", type=int, default=21, help="runs of each tree (default 21)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="the ptxalloc arguments, after '--'")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the ptxalloc command after '--'")
    trees = [str(Path(s).resolve()) for s in (args.src or [str(REPO / "src")])]
    for tree in trees:
        subprocess.run([args.python, "-m", "compileall", "-q", tree], check=True)
    cpu: dict[str, list[float]] = {tree: [] for tree in trees}
    for _ in range(args.runs):
        for tree in trees:
            seconds, code, err = child_cpu([args.python, "-m", "ptxalloc", *command],
                                           dict(os.environ, PYTHONPATH=tree))
            if code:
                raise SystemExit(f"{tree}: exit {code}: {err}")
            cpu[tree].append(seconds * 1000)
    print(f"ptxalloc {' '.join(command)}: CPU ms over {args.runs} runs each, trees in turn")
    for tree, ms in cpu.items():
        print(f"  {tree:50} median {statistics.median(ms):6.1f}  min {min(ms):6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
