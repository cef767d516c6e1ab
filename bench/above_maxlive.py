"""Why registers exceed MaxLive of the code colored at K = 255 (issue 13, the goal "registers =
MaxLive on 95 % of functions"): the functions a ``bench/quality.py --json`` run lists above
their bound, grouped by cause.

    PYTHONPATH=src python3 bench/above_maxlive.py RUN.json [BEFORE.json]

For each allocator, every function ptxas reports whose registers at K = 255 exceed its
``max_live`` (MaxLive of the copy the allocator colors: after the passes before allocation and
legalization) is passed through the pipeline's passes again (``pipeline.pre_passes``, the
knobs of the run) and put in the first group that fits:

* calling convention: a ``.func`` or a function that makes calls; values live across a call
  sit in callee-saved R24-R30 so that no save surrounds the call (seed 003), which puts the
  count at 25 or more whatever MaxLive is;
* predicates beyond P0-P6: more predicates live at once than the file holds, so some spill
  into general registers, which MaxLive (counted per file) does not include;
* vector or tuple operands: the function has register groups that need aligned consecutive
  registers (``analysis.tuples``), which a coloring cannot always pack to MaxLive;
* other: the coloring (or the calling convention's fixed registers).

``BEFORE.json`` (another run, e.g. with ``--knob schedule=0``) adds each function's registers
and MaxLive there.
"""

from __future__ import annotations

import json
import sys

from ptxalloc.alloc.driver import Options
from ptxalloc.analysis import pressure_of
from ptxalloc.analysis.calls import is_call
from ptxalloc.analysis.tuples import find_tuples
from ptxalloc.ir.cfg import CFG
from ptxalloc.pipeline import pre_passes
from ptxalloc.ptx import parse_file
from ptxalloc.target.units import PRED_REGS


def cause(fn, allocator: str, knobs: dict) -> str:
    work, _ = pre_passes(fn, Options(allocator=allocator, knobs=dict(knobs)))
    if fn.kind == "func" or any(is_call(ins) for ins in work.instructions()):
        return "calling convention"
    if pressure_of(work).max_preds > PRED_REGS:
        return "predicates beyond P0-P6"
    if find_tuples(work, CFG(work).instrs).groups:
        return "vector or tuple operands"
    return "other"


def main() -> int:
    run = json.loads(open(sys.argv[1]).read())
    before = {}
    if len(sys.argv) > 2:
        for f in json.loads(open(sys.argv[2]).read())["files"]:
            for name, row in f["budgets"]["255"].items():
                before[(f["path"].rsplit("/", 1)[-1], name)] = row
    allocators = sorted({a for f in run["files"] for row in f["budgets"]["255"].values()
                         for a in row if a != "ptxas"})
    for allocator in allocators:
        groups: dict[str, list[str]] = {}
        for f in run["files"]:
            module = None
            for name, row in f["budgets"]["255"].items():
                got = row.get(allocator)
                if "ptxas" not in row or got is None or got["registers"] <= got["max_live"]:
                    continue
                module = module or parse_file(f["path"])
                fn = next(x for x in module.functions if x.name == name)
                file = f["path"].rsplit("/", 1)[-1]
                line = f"{file} {name[:48]}: {got['registers']} registers, MaxLive {got['max_live']}"
                if got.get("floor", got["max_live"]) > got["max_live"]:
                    line += f", floor {got['floor']}"       # the report's register_floor
                old = before.get((file, name), {}).get(allocator)
                if old:
                    line += f" (before: {old['registers']}, {old['max_live']})"
                groups.setdefault(cause(fn, allocator, run.get("knobs", {})), []).append(line)
        print(f"{allocator}: {sum(map(len, groups.values()))} functions above MaxLive at K = 255")
        for group, lines in groups.items():
            print(f"  {group}: {len(lines)}")
            for line in lines:
                print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
