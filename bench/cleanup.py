"""What the post-allocation clean-up (knob ``PostAllocCleanup``, ``alloc/cleanup.py``; issue 13)
buys: per source and budget, the instructions in the output with the pass off and on, the uses
it propagated, the inserted copies, other inserted definitions and original definitions it
removed, spill bytes and registers (which it must not change) and the CPU time of allocating
with it off and on. Every allocation is proven by the checker (as ``ptxalloc allocate``) and,
with ``--assemble``, the output assembled by ptxas.

    PYTHONPATH=src python3 bench/cleanup.py [--sources corpus,triton] [--files N]
        [--budgets 24,32,64,255] [--allocators briggs,fatpoint] [--assemble]

The corpus sample is quality.py's (``--files N``: N files evenly spread over the MANIFEST).
``--sass FILE:K ...`` instead compares, per file, the SASS instructions ptxas makes of the
allocated PTX with the pass off and on (``cuobjdump -sass``; ``pip install
nvidia-cuda-cuobjdump``), since ptxas runs its own copy propagation and dead-code elimination.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

from common import REPO
from quality import _files


def _instructions(ptx: str) -> int:
    """Instruction lines of allocated PTX (no directives, labels, comments or ``//@removed``)."""
    n = 0
    for line in ptx.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".", "{", "}", "@@")) or s.endswith(":"):
            continue
        n += 1
    return n


def measure(path: str, k: int, allocator: str, knob: int) -> dict | None:
    from ptxalloc.errors import AllocationError
    from ptxalloc.pipeline import allocate
    text = open(path).read()
    t0 = time.process_time()
    try:
        res = allocate(text, registers=k, allocator=allocator, filename=path,
                       knobs={"PostAllocCleanup": knob})
    except AllocationError:
        return None
    cpu = time.process_time() - t0
    rows = res.report()["functions"]
    got = {"cpu": cpu, "instructions": _instructions(res.ptx),
           "spill": sum(r["spill_stores_bytes"] + r["spill_loads_bytes"] for r in rows),
           "registers": sum(r["registers"] for r in rows), "ptx": res.ptx}
    for key in ("uses_propagated", "moves_removed", "inserted_removed", "original_removed"):
        got[key] = sum(r.get("cleanup", {}).get(key, 0) for r in rows)
    return got


def _sass_instructions(ptx: str, arch: str) -> int:
    """SASS instructions of the cubin ptxas makes of ``ptx`` (``/*0040*/`` lines)."""
    import shutil
    import subprocess
    import tempfile
    tool = shutil.which("cuobjdump") or next(
        (str(p) for p in __import__("pathlib").Path.home().glob(
            ".local/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump")), None)
    if tool is None:
        raise SystemExit("cuobjdump is not installed (pip install nvidia-cuda-cuobjdump)")
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = f"{tmp}/in.ptx", f"{tmp}/out.cubin"
        open(src, "w").write(ptx)
        subprocess.run(["ptxas", f"-arch={arch}", src, "-o", cubin], check=True,
                       capture_output=True)
        out = subprocess.run([tool, "-sass", cubin], check=True, capture_output=True,
                             text=True).stdout
    return len(re.findall(r"/\*[0-9a-f]{4,}\*/\s+\S", out))


def sass(specs: list[str]) -> int:
    from ptxalloc import ptxas
    print(f"{'file':<48} {'K':>4} {'PTX off':>8} {'PTX on':>7} {'SASS off':>8} {'SASS on':>8}")
    for spec in specs:
        path, k = spec.rsplit(":", 1)
        off = measure(path, int(k), "briggs", 0)
        on = measure(path, int(k), "briggs", 1)
        target = re.search(r"^\s*\.target\s+(\w+)", on["ptx"], re.M)
        arch = ptxas.arch_for(target.group(1) if target else None)
        print(f"{path[-48:]:<48} {k:>4} {off['instructions']:>8} {on['instructions']:>7} "
              f"{_sass_instructions(off['ptx'], arch):>8} "
              f"{_sass_instructions(on['ptx'], arch):>8}", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sass", nargs="+", metavar="FILE:K")
    ap.add_argument("--sources", default="corpus,triton")
    ap.add_argument("--files", type=int, default=60)
    ap.add_argument("--budgets", default="24,32,64,255")
    ap.add_argument("--allocators", default="briggs,fatpoint")
    ap.add_argument("--assemble", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    if args.sass:
        return sass(args.sass)
    from ptxalloc import ptxas
    files = _files(args.sources.split(","), args.files)
    keys = ("instructions", "uses_propagated", "moves_removed", "inserted_removed",
            "original_removed")
    print(f"{'source':<7} {'K':>4} {'allocator':<9} {'files':>5} {'instr off':>9} "
          f"{'instr on':>9} {'propag.':>7} {'moves':>6} {'inserted':>8} {'original':>8} "
          f"{'spill=':>6} {'regs=':>5} {'cpu off':>8} {'cpu on':>8} {'asm fail':>8}")
    bad = 0
    for source in dict.fromkeys(s for s, _, _ in files):
        for k in [int(b) for b in args.budgets.split(",")]:
            for alloc in args.allocators.split(","):
                tot = {"off": dict.fromkeys(keys, 0), "on": dict.fromkeys(keys, 0)}
                cpu = {"off": 0.0, "on": 0.0}
                n = same_spill = same_regs = asm_fail = 0
                for src, path, arch in files:
                    if src != source:
                        continue
                    off = measure(path, k, alloc, 0)
                    on = measure(path, k, alloc, 1)
                    if off is None or on is None:
                        continue
                    n += 1
                    for name, got in (("off", off), ("on", on)):
                        cpu[name] += got["cpu"]
                        for key in keys:
                            tot[name][key] += got[key]
                    same_spill += off["spill"] == on["spill"]
                    same_regs += off["registers"] == on["registers"]
                    if args.assemble and ptxas.available():
                        target = re.search(r"^\s*\.target\s+(\w+)", on["ptx"], re.M)
                        a = ptxas.assemble(on["ptx"], arch or ptxas.arch_for(
                            target.group(1) if target else None))
                        if not a.ok:
                            asm_fail += 1
                bad += asm_fail + (n - same_spill) + (n - same_regs)
                on_ = tot["on"]
                print(f"{source:<7} {k:>4} {alloc:<9} {n:>5} {tot['off']['instructions']:>9} "
                      f"{on_['instructions']:>9} {on_['uses_propagated']:>7} "
                      f"{on_['moves_removed']:>6} {on_['inserted_removed']:>8} "
                      f"{on_['original_removed']:>8} {same_spill:>6} {same_regs:>5} "
                      f"{cpu['off']:>8.1f} {cpu['on']:>8.1f} {asm_fail:>8}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
