"""Spills explained (SPEC section 9; seed 002 "Spill Cost Formula"): for every value an
allocation spilled or rematerialized, its definitions and uses (PTX and source lines), the
deepest loop it lives in, its spill cost, the stores, reloads and recomputations inserted for
it, and why — pressure above the budget at a line, or no register left at the budget where
pressure was within it (coloring, alignment); values saved around calls and callee-saved
registers are the calling convention's, counted apart in bytes.

The inserted instructions are found by their ``origin`` (:mod:`ptxalloc.spill.rewrite`,
:mod:`ptxalloc.alloc.convention`): ``spill``/``reload`` (pressure, through ``.local``),
``remat`` (recomputed), ``pspill``/``preload`` (a predicate kept in a general register),
``save``/``restore`` (live across a call), ``csave``/``crestore`` (callee-saved registers).
"""

from __future__ import annotations

from ..analysis import analyze_function
from ..analysis.sources import format_source, source_of
from ..ir.build import stored, width_bytes
from ..ir.registers import RegClass
from ..util import bits

PRESSURE_KINDS = {"spill": "stores", "reload": "reloads", "remat": "recomputations",
                  "pspill": "stores", "preload": "reloads"}
CONVENTION_KINDS = {"save": "stores", "restore": "reloads"}
CALLEE_KINDS = ("csave", "crestore")


def explain_spills(original, result, sm, files: dict[int, str]) -> dict:
    """``{"values": [...], "convention": {...}}`` for one function's allocation ``result`` of
    the function ``original`` (as parsed)."""
    counts: dict[int, dict[str, int]] = {}
    conv = {"values": {}, "save_bytes": 0, "restore_bytes": 0, "callee_saved_bytes": 0}
    work_regs = result.function.regs if result.function is not None else None
    for ins in (result.function.instructions() if result.function is not None else ()):
        o = ins.origin
        if not o:
            continue
        kind = o.kind.value
        if kind in PRESSURE_KINDS:
            row = counts.setdefault(o.value, {"stores": 0, "reloads": 0, "recomputations": 0,
                                           "store_bytes": 0, "reload_bytes": 0})
            row[PRESSURE_KINDS[kind]] += 1
            if kind == "spill":
                row["store_bytes"] += width_bytes(work_regs, stored(ins))
            elif kind == "reload":
                row["reload_bytes"] += width_bytes(work_regs, ins.defs[0])
        elif kind in CONVENTION_KINDS:
            name = original.regs.names[o.value]
            c = conv["values"].setdefault(name, {"saves": 0, "restores": 0})
            if kind == "save":
                c["saves"] += 1
                conv["save_bytes"] += width_bytes(work_regs, stored(ins))
            else:
                c["restores"] += 1
                conv["restore_bytes"] += width_bytes(work_regs, ins.defs[0])
        elif kind in CALLEE_KINDS:
            conv["callee_saved_bytes"] += 4
    if not counts:
        return {"values": [], "convention": conv}
    # values in the uniform files (--uniform) are no part of R's pressure
    a = analyze_function(original, sm,
                         uniform=result.uniform_mask & ((1 << len(original.regs)) - 1))
    cfg = a.cfg
    p = a.pressure
    regs = original.regs
    budget = result.budget
    across = 0
    call_line = {}
    for i, live in a.live_across_calls.items():
        across |= live
        for v in bits(live):
            call_line.setdefault(v, cfg.instrs[i].line)
    want = set(counts)
    want_mask = 0
    for v in want:
        want_mask |= 1 << v
    where: dict[int, dict] = {v: {"defs": [], "uses": [], "depth": 0, "worst": (-1.0, -1)}
                              for v in want}
    for b in cfg.blocks:
        after = a.liveness.live_after(b.id)
        in_block = 0                             # the spilled values live somewhere in b
        for k, ins in enumerate(b.instrs):
            i = b.first + k
            here = after[k]
            for d in ins.defs:
                here |= 1 << d
            here &= want_mask
            for d in ins.defs:
                if d in want:
                    where[d]["defs"].append(i)
            for u in ins.uses:
                if u in want:
                    where[u]["uses"].append(i)
            if here:
                in_block |= here
                gpr = p.gpr[i]
                for v in bits(here):             # the spilled values live here
                    w = where[v]
                    if gpr > w["worst"][0]:
                        w["worst"] = (gpr, i)
        if in_block and b.depth:
            for v in bits(in_block):
                w = where[v]
                if b.depth > w["depth"]:
                    w["depth"] = b.depth
    name = regs.names.__getitem__
    values = []
    for v in sorted(want, key=lambda v: (where[v]["defs"] or [-1])[0]):
        w = where[v]
        worst, at = w["worst"]
        if at >= 0 and worst > budget:
            why = (f"pressure {worst:g} > budget {budget} at line {cfg.instrs[at].line}")
        elif v in call_line:
            why = f"live across the call at line {call_line[v]}"
        elif regs.classes[v] == RegClass.PRED:
            why = "predicate registers exhausted"
        else:
            why = (f"no register left at budget {budget} (pressure at most {worst:g} where "
                   f"it lives: coloring or alignment)")
        row = {"name": regs.names[v], "class": regs.classes[v].name,
               "defined": [_site(cfg.instrs[i], name, files) for i in w["defs"]],
               "used": [_site(cfg.instrs[i], name, files) for i in w["uses"]],
               "loop_depth": w["depth"], "spill_cost": round(a.costs[v], 3),
               "why": why, "pressure_line": cfg.instrs[at].line if at >= 0 else None}
        row.update(counts[v])
        values.append(row)
    return {"values": values, "convention": conv}


def _site(ins, name, files) -> dict:
    return {"ptx_line": ins.line, "ptx": ins.render(name).replace("\t", " "),
            "source": source_of(ins.loc, files)}


def spill_lines(explained: dict, limit: int = 8) -> list[str]:
    """The ``allocate -v`` lines naming each spilled value (at most ``limit`` uses each)."""
    out = []
    for v in explained["values"]:
        how = ", ".join(f"{v[k]} {k}" for k in ("stores", "reloads", "recomputations") if v[k])
        out.append(f"    spilled {v['name']} ({v['class']}, loop depth {v['loop_depth']}, cost "
                   f"{v['spill_cost']:g}): {how}; {v['why']}")
        for label, sites in (("defined", v["defined"]), ("used", v["used"])):
            for s in sites[:limit]:
                src = f" [{format_source(s['source'])}]" if s["source"] else ""
                out.append(f"      {label} line {s['ptx_line']}{src}: {s['ptx']}")
            if len(sites) > limit:
                out.append(f"      ... {len(sites) - limit} more {label} sites")
    c = explained["convention"]
    if c["save_bytes"] or c["restore_bytes"] or c["callee_saved_bytes"]:
        out.append(f"    calling convention (not pressure spills): {c['save_bytes']} bytes saved "
                   f"and {c['restore_bytes']} restored around calls for "
                   f"{len(c['values'])} value(s), {c['callee_saved_bytes']} bytes of "
                   f"callee-saved registers")
    return out
