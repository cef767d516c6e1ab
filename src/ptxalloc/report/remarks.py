"""``allocate --remarks FILE.yaml``: the spills of an allocation as LLVM optimization records
(the YAML of ``-fsave-optimization-record`` / ``-pass-remarks-output``), the format LLVM's
opt-viewer tools read (SPEC section 9; issue 14, "Formats people parse").

Modelled on what LLVM's greedy register allocator emits (``RAGreedy::reportStats``): per loop
whose blocks hold spill code, a ``LoopSpillReloadCopies`` remark (nested loops counted in their
parents, as LLVM counts them), and per function one ``SpillReloadCopies`` remark with the totals;
each a ``--- !Missed`` document with ``Pass: regalloc``, ``Name``, ``DebugLoc`` (``{ File,
Line, Column }`` from the ``.loc`` of the loop header's or the function's first located
instruction; absent without ``.loc``), ``Function`` and ``Args``: ``NumSpills`` (stores to the
spill area), ``TotalSpillsCost``, ``NumReloads``, ``TotalReloadsCost`` and, ptxalloc's own,
``NumRemats``/``TotalRematsCost`` (values recomputed instead of reloaded). A cost is the sum of
the static frequencies of the blocks holding the instructions, relative to the entry block
(:mod:`ptxalloc.ir.cfg`: back edges taken 90 %, other branches 50/50), as LLVM weights by block
frequency. Calling-convention
saves and restores are not pressure spills and are not counted. A function without spill code
has no remark.
"""

from __future__ import annotations

import json

from ..analysis.sources import source_of
from ..ir.cfg import CFG
from ..ir.edits import EditKind, Merged

# the inserted instructions by the kind of their Edit (ptxalloc.ir.edits, ptxalloc.spill.rewrite)
KINDS = {EditKind.SPILL: "Spills", EditKind.PSPILL: "Spills", EditKind.RELOAD: "Reloads",
         EditKind.PRELOAD: "Reloads", EditKind.REMAT: "Remats"}
WORDS = {"Spills": "spills", "Reloads": "reloads", "Remats": "remats"}


def remarks_yaml(results, files: dict[int, str]) -> str:
    """The YAML stream for the allocated functions ``results`` (FunctionResults);
    ``files`` the module's ``.file`` table."""
    docs = []
    for r in results:
        if r.function is None:
            continue
        cfg = CFG(r.function)
        per_block = [_count(b) for b in cfg.blocks]
        for lp in sorted(cfg.loops, key=lambda lp: cfg.blocks[lp.header].first):
            stats = _sum(per_block, cfg, lp.blocks)
            if any(stats[k][0] for k in stats):
                docs.append(_doc("LoopSpillReloadCopies", r.name,
                                 _first_loc(cfg, [lp.header], files), stats, "loop"))
        stats = _sum(per_block, cfg, range(len(cfg.blocks)))
        if any(stats[k][0] for k in stats):
            docs.append(_doc("SpillReloadCopies", r.name,
                             _first_loc(cfg, range(len(cfg.blocks)), files), stats, "function"))
    return "".join(docs)


def _count(block) -> dict[str, int]:
    """The block's spills, reloads and recomputations, one per value (a ``.v2``/``.v4``
    access merged by ``SpillVectorize`` counts its members, as LLVM counts a spill per
    value)."""
    out = {"Spills": 0, "Reloads": 0, "Remats": 0}
    for ins in block.instrs:
        o = ins.origin
        kind = KINDS.get(o.kind) if o is not None else None
        if kind:
            out[kind] += len(o.edits) if type(o) is Merged else 1
    return out


def _sum(per_block, cfg, blocks) -> dict[str, tuple[int, float]]:
    """``{kind: (count, frequency-weighted cost)}`` over ``blocks``."""
    out = {}
    for kind in ("Spills", "Reloads", "Remats"):
        n = sum(per_block[b][kind] for b in blocks)
        cost = sum(per_block[b][kind] * cfg.blocks[b].freq for b in blocks)
        out[kind] = (n, cost)
    return out


def _first_loc(cfg, blocks, files) -> dict | None:
    for b in blocks:
        for ins in cfg.blocks[b].instrs:
            if ins.loc is not None:
                return source_of(ins.loc, files)
    return None


def _doc(name: str, function: str, loc: dict | None, stats, where: str) -> str:
    lines = ["--- !Missed", "Pass:            regalloc", f"Name:            {name}"]
    if loc is not None:
        lines.append(f"DebugLoc:        {{ File: {json.dumps(loc['file'])}, Line: {loc['line']}, "
                     f"Column: {loc['column']} }}")
    lines += [f"Function:        {json.dumps(function)}", "Args:"]
    for kind, (n, cost) in stats.items():
        if n:
            lines += [f"  - Num{kind}: '{n}'", f"  - String: ' {WORDS[kind]} '",
                      f"  - Total{kind}Cost: '{cost:e}'",
                      f"  - String: ' total {WORDS[kind]} cost '"]
    lines += [f"  - String: generated in {where}", "..."]
    return "\n".join(lines) + "\n"
