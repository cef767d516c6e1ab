"""How much register pressure moves from R to the uniform files (issue 17, seed 004 "Register
Classes"; :mod:`ptxalloc.analysis.uniformity`, :mod:`ptxalloc.alloc.uniform`).

    PYTHONPATH=src python3 bench/uniform.py [--every N] [--ptxas] [--top 10]

For every corpus file ptxas accepts (every N-th with ``--every``), each function is allocated
at the default budget twice, with ``--uniform`` off and on, at the architecture the MANIFEST's
ptxas figures were taken for (``ptxas_arch``: the file's own target when sm_75 or later, else
sm_90 — the corpus is mostly sm_30 PTX, and the uniform datapath needs sm_75), every
allocation proven by the checker. Prints, over the functions:

* the share of values (registers with a definition) found uniform by the analysis — all
  uniform values (floating point included) and those the uniform datapath can hold;
* the values placed in UR/UP, and the UR and UP registers used;
* MaxLive of R as the allocator starts (``max_live_legalized``) without and with the uniform
  values, and the R registers used without and with them;
* the functions left out: ``.func``s and kernels with calls (the calling convention keeps R/P
  only), and allocations refused at the budget;
* the R registers used beside ptxas's own "Used N registers" (the MANIFEST's, which counts R
  only: ptxas keeps its uniform registers apart too), summed over the eligible functions;
* with ``--ptxas``, how many uniform outputs ptxas assembles;
* the ``--top`` functions by R registers saved.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import corpus_root, manifest  # noqa: E402

from ptxalloc import ptxas  # noqa: E402
from ptxalloc.alloc.driver import Options  # noqa: E402
from ptxalloc.analysis.uniformity import DATAPATH_RULE, VALUE_RULE, uniform_registers  # noqa: E402
from ptxalloc.errors import AllocationError  # noqa: E402
from ptxalloc.ir.cfg import CFG  # noqa: E402
from ptxalloc.pipeline import allocate_module  # noqa: E402
from ptxalloc.ptx.parser import parse  # noqa: E402


def shares(fn) -> tuple[int, int, int]:
    """Values (registers with a definition), uniform ones, datapath-uniform ones."""
    cfg = CFG(fn)
    defined = 0
    for ins in cfg.instrs:
        for d in ins.defs:
            defined |= 1 << d
    return (defined.bit_count(), uniform_registers(fn, cfg, VALUE_RULE).bit_count(),
            uniform_registers(fn, cfg, DATAPATH_RULE).bit_count())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--ptxas", action="store_true", help="assemble every uniform output")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    root = corpus_root()
    if root is None:
        sys.exit("bench/uniform.py: ../shared/corpus is absent")
    entries = sorted((f for f in manifest() if f["ptxas"]["ok"]),
                     key=lambda f: f["path"])[::args.every]
    t = {"files": 0, "functions": 0, "eligible": 0, "values": 0, "uniform": 0, "datapath": 0,
         "placed": 0, "ur": 0, "up": 0, "maxlive": [0, 0], "regs": [0, 0], "refused": 0,
         "assembled": 0, "ptxas_failed": 0, "with_ur": 0, "saved_fns": 0,
         "vs_ptxas": [0, 0, 0]}
    rows = []
    t0 = time.process_time()
    for entry in entries:
        rel = entry["path"]
        path = root / rel
        arch = entry["ptxas_arch"]
        theirs = {f["name"]: f.get("registers") for f in entry["ptxas"]["functions"]}
        try:
            module = parse(path.read_text(errors="replace"), str(path))
        except Exception:               # noqa: BLE001 - a file the parser refuses
            continue
        try:
            off = allocate_module(module, None, "briggs", arch)
            on = allocate_module(module, None, "briggs", arch,
                                 options=Options(uniform=True))
        except AllocationError:
            t["refused"] += 1
            continue
        t["files"] += 1
        fns = {f.name: f for f in module.functions}
        for a, b in zip(off.functions, on.functions):
            t["functions"] += 1
            info = b.extra.get("uniform_values")
            if info is None:            # under the calling convention: R/P only
                continue
            t["eligible"] += 1
            n, u, d = shares(fns[a.name])
            t["values"] += n
            t["uniform"] += u
            t["datapath"] += d
            t["placed"] += info["placed"]
            t["ur"] += b.uniform_registers
            t["up"] += b.uniform_predicates
            t["with_ur"] += bool(b.uniform_registers or b.uniform_predicates)
            t["maxlive"][0] += a.max_live_legalized
            t["maxlive"][1] += info["max_live_registers"]
            t["regs"][0] += a.registers
            t["regs"][1] += b.registers
            t["saved_fns"] += b.registers < a.registers
            if theirs.get(a.name) is not None:
                for k, x in enumerate((a.registers, b.registers, theirs[a.name])):
                    t["vs_ptxas"][k] += x
            rows.append((a.registers - b.registers, rel, a.name, a.max_live_legalized,
                         info["max_live_registers"], a.registers, b.registers,
                         b.uniform_registers, b.uniform_predicates))
        if args.ptxas and ptxas.available():
            got = ptxas.assemble(on.ptx, arch)
            t["assembled" if got.ok else "ptxas_failed"] += 1
            if not got.ok:
                print(f"ptxas refused the uniform output of {rel}: {got.output[:200]}")
    cpu = time.process_time() - t0

    def pct(x: int, y: int) -> str:
        return f"{100 * x / y:.1f} %" if y else "n/a"

    print(f"corpus files: {t['files']} allocated at the MANIFEST's ptxas_arch "
          f"({t['refused']} refused), "
          f"{t['functions']} functions, {t['eligible']} eligible (kernels without calls)")
    print(f"values found uniform: {t['uniform']} of {t['values']} ({pct(t['uniform'], t['values'])}); "
          f"on the uniform datapath: {t['datapath']} ({pct(t['datapath'], t['values'])}); "
          f"placed in UR/UP: {t['placed']} ({pct(t['placed'], t['values'])})")
    e = max(t["eligible"], 1)
    print(f"functions using UR/UP: {t['with_ur']}; UR used {t['ur']} in all "
          f"(mean {t['ur'] / e:.2f}), UP {t['up']} (mean {t['up'] / e:.2f})")
    print(f"MaxLive of R (legalized), sum over eligible functions: {t['maxlive'][0]} -> "
          f"{t['maxlive'][1]} ({pct(t['maxlive'][1] - t['maxlive'][0], t['maxlive'][0])}); "
          f"mean {t['maxlive'][0] / e:.2f} -> {t['maxlive'][1] / e:.2f}")
    print(f"R registers used, sum: {t['regs'][0]} -> {t['regs'][1]} "
          f"({pct(t['regs'][1] - t['regs'][0], t['regs'][0])}); mean {t['regs'][0] / e:.2f} -> "
          f"{t['regs'][1] / e:.2f}; {t['saved_fns']} functions use fewer")
    v = t["vs_ptxas"]
    print(f"beside ptxas -v (functions both name): R registers used {v[0]} (uniform off), "
          f"{v[1]} (on); ptxas {v[2]}")
    if args.ptxas:
        print(f"ptxas: {t['assembled']} uniform outputs assembled, {t['ptxas_failed']} refused")
    print(f"cpu {cpu:.1f} s")
    rows.sort(reverse=True)
    if args.top and rows:
        print(f"\ntop {args.top} by R registers saved: file function | MaxLive R off -> on | "
              f"R off -> on | UR UP")
        for saved, rel, name, m0, m1, r0, r1, ur, up in rows[:args.top]:
            print(f"  {rel} {name[:40]} | {m0} -> {m1} | {r0} -> {r1} | {ur} {up}")


if __name__ == "__main__":
    main()
