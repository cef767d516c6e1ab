"""Record, then compare, a snapshot of allocations: proof that a refactoring changed nothing.

    PYTHONPATH=src python3 bench/same_allocations.py record /tmp/arch-ref
    PYTHONPATH=src python3 bench/same_allocations.py compare /tmp/arch-ref

For every ``tests/data/*.ptx``, ``tests/data/hand/*.ptx``, ``examples/*.ptx`` and every 10th
corpus file under 300 KB (sorted by path), each allocator in ``--allocators`` (default briggs
and fatpoint) and each budget in 15, 64 and 255 it runs the command
``ptxalloc allocate F --registers K --allocator A -o OUT --json OUT.json`` (in process, through
``cli.main``) and keeps the PTX, the report (wall-clock times removed) and the exit status and
message, the checkout's and the corpus's paths in them written ``<repo>`` and ``<corpus>``
(a snapshot recorded in one worktree compares with another's). ``compare`` runs the same
again into a scratch directory and lists every output that differs byte for byte; it exits 1
when any does. The snapshot itself is not part of the repo.

``--large`` (issue 16's speed work) takes the large files instead — renderer.ptx,
convolutionTexture.ptx, thrust's histogram.ptx, matrix_free, tests/data/triton/attn_bwd_d64.ptx —
and 24 more corpus files (an even sample of each source: gpuocelot and zluda 8 each, the small
sources 2 each), each run three ways: the default (briggs, ptxas's limit),
``--allocator fatpoint`` and ``--registers 32``.

``--triton`` takes the kernels of ``tests/data/triton`` (which the default leaves out: it
lists ``tests/data/*.ptx`` only) with briggs and fat-point each at ptxas's limit and at K = 64,
128 and 255: the spilling paths of the attention kernels (reliefs, second chances, splitting)
that the other snapshots reach rarely (issue 16, branch ``color9``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, corpus_root  # noqa: E402

BUDGETS = (15, 64, 255)
LARGE_FILES = ("gpuocelot/tests/ptx/unstructured/renderer.ptx",
               "gpuocelot/tests/ptx/sdk2.2/convolutionTexture.ptx",
               "gpuocelot/tests/ptx/thrust/histogram.ptx",
               "ptx90parser/tests/sample/matrix_free_device_matrix_vector_01.1.sm_80.ptx")
LARGE_RUNS = {"default": [], "fatpoint": ["--allocator", "fatpoint"],
              "k32": ["--registers", "32"]}
TRITON_RUNS = {f"{a}.{k}": ["--allocator", a] + ([] if k == "default" else ["--registers", k])
               for a in ("briggs", "fatpoint") for k in ("default", "64", "128", "255")}


def inputs() -> list[Path]:
    files = sorted((REPO / "tests" / "data").glob("*.ptx"))
    files += sorted((REPO / "tests" / "data" / "hand").glob("*.ptx"))
    files += sorted((REPO / "examples").glob("*.ptx"))
    root = corpus_root()
    if root is not None:
        corpus = sorted(p for p in root.rglob("*.ptx") if p.stat().st_size < 300_000)
        files += corpus[::10]
    return files


def large_inputs() -> list[Path]:
    files = [REPO / "tests" / "data" / "triton" / "attn_bwd_d64.ptx"]
    root = corpus_root()
    if root is not None:
        files += [root / f for f in LARGE_FILES]
        for source in sorted(p for p in root.iterdir() if p.is_dir()):
            found = sorted(p for p in source.rglob("*.ptx") if p not in files)
            take = 8 if len(found) > 100 else 2
            files += found[::max(1, len(found) // take)][:take]
    return files


def small_runs(allocators: list[str]) -> dict[str, list[str]]:
    return {f"{a}.{k}": ["--registers", str(k), "--allocator", a]
            for a in allocators for k in BUDGETS}


def _untimed(value):
    """The report without wall-clock figures, which differ from run to run (``seconds``,
    ``*_seconds``, and giving way's ``seconds_other``)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items()
                if not (k == "seconds" or k.endswith("_seconds") or k.startswith("seconds_"))}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _stem(path: Path) -> str:
    try:
        rel = path.relative_to(REPO)
    except ValueError:
        rel = Path("corpus") / path.relative_to(corpus_root())
    return str(rel).replace("/", "__")


def _portable(text: str) -> str:
    """``text`` with the checkout's and the corpus's own paths named ``<repo>`` and
    ``<corpus>``: a snapshot recorded in one worktree compares with another's."""
    root = corpus_root()
    if root is not None:
        text = text.replace(str(root), "<corpus>")
    return text.replace(str(REPO), "<repo>")


def run_all(out: Path, files: list[Path], runs: dict[str, list[str]]) -> None:
    from ptxalloc import cli

    out.mkdir(parents=True, exist_ok=True)
    for f in files:
        for run, flags in runs.items():
            base = out / f"{_stem(f)}.{run}"
            ptx, rep = base.with_suffix(base.suffix + ".ptx"), base.with_suffix(
                base.suffix + ".json")
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                rc = cli.main(["allocate", str(f), *flags,
                               "-o", str(ptx), "--json", str(rep)])
            if rep.exists():
                rep.write_text(_portable(json.dumps(_untimed(json.loads(rep.read_text())),
                                                    indent=1, sort_keys=True) + "\n"))
            if ptx.exists():
                ptx.write_text(_portable(ptx.read_text()))
            base.with_suffix(base.suffix + ".status").write_text(
                _portable(f"{rc}\n{err.getvalue()}"))
        print(f"{f.name}", flush=True)


def compare(ref: Path, new: Path) -> list[str]:
    names = sorted({p.name for p in ref.iterdir()} | {p.name for p in new.iterdir()})
    diffs = []
    for n in names:
        a, b = ref / n, new / n
        if not a.exists() or not b.exists() or a.read_bytes() != b.read_bytes():
            if a.exists() and b.exists() and n.endswith(".json") and \
                    _untimed(json.loads(a.read_bytes())) == _untimed(json.loads(b.read_bytes())):
                continue        # a snapshot recorded before a timing key was left out
            diffs.append(n)
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["record", "compare"])
    ap.add_argument("snapshot", type=Path)
    ap.add_argument("--allocators", default="briggs,fatpoint")
    ap.add_argument("--large", action="store_true",
                    help="the large files and every 20th corpus file, three runs each")
    ap.add_argument("--triton", action="store_true",
                    help="tests/data/triton, both allocators at the default, 64, 128, 255")
    args = ap.parse_args()
    if args.large:
        files, runs = large_inputs(), LARGE_RUNS
    elif args.triton:
        files, runs = sorted((REPO / "tests" / "data" / "triton").glob("*.ptx")), TRITON_RUNS
    else:
        files, runs = inputs(), small_runs(args.allocators.split(","))
    if args.mode == "record":
        run_all(args.snapshot, files, runs)
        return 0
    with tempfile.TemporaryDirectory(prefix="same-alloc-") as tmp:
        run_all(Path(tmp), files, runs)
        diffs = compare(args.snapshot, Path(tmp))
    for d in diffs:
        print(f"DIFFERS: {d}")
    print(f"{len(diffs)} output(s) differ")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
