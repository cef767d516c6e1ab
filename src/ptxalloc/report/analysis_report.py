"""The ``analyze`` report: per function MaxLive, interference statistics, the pressure peak with
the values live there (where each is defined and last used, with ``.loc`` source lines), the top
pressure points, and what the register count means for occupancy (SPEC section 9)."""

from __future__ import annotations

from ..analysis import FunctionAnalysis
from ..analysis.explain_peak import (change_scope, group_by_source, peak_mask, peak_values,
                                     remat_and_costs, what_to_change)
from ..analysis.line_pressure import line_pressure
from ..analysis.sources import format_source, source_of
from ..target.occupancy import DEFAULT_BLOCK, launch_threads, occupancy
from ..target.sm import SMProfile


def function_row(a: FunctionAnalysis, sm: SMProfile, budget: int | None, top: int = 5,
                 convention: dict | None = None, budget_from: str | None = None,
                 files: dict[int, str] | None = None, lines: bool = False,
                 block: int | None = None, static_shared: int = 0) -> dict:
    """One function's analysis; ``budget`` (with ``budget_from``, where it came from) is the
    budget its occupancy is also shown at; ``files`` the module's ``.file`` table; ``lines``
    adds the per-line figures (``lines``, ``source_lines``, ``histogram``); ``block`` the
    threads per block (default: the launch bounds, else 256); ``static_shared`` the function's
    own static shared memory per block (:mod:`ptxalloc.analysis.static_shared`), which the
    occupancies count."""
    fn = a.fn
    files = files or {}
    per_line = line_pressure(a.cfg, a.pressure, files, top)
    p = a.pressure
    cfg = a.cfg
    peak = p.peak
    if block is not None:
        block_from = "--block-size"
    else:
        bound = launch_threads(fn.directives)
        block, block_from = (bound[1], f".{bound[0]}") if bound else (DEFAULT_BLOCK,
                                                                     "default")
    # the costs of the values shown (at the peak, and those "what to change" may pick) only
    scope = change_scope(a, sm, block, static_shared)
    shared = remat_and_costs(a, peak_mask(a) | scope.values)
    values = peak_values(a, files, shared)
    occ = {"block_size": block, "static_shared_bytes": static_shared,
           "at_max_live": _occ(sm, p.max_live, block, static_shared)}
    if budget is not None:
        occ["at_budget"] = _occ(sm, budget, block, static_shared)
    row = {
        "name": fn.name,
        "kind": fn.kind,
        "instructions": len(cfg.instrs),
        "max_live": {"registers": p.max_live, "predicates": p.max_preds},
        "interference": a.graph.statistics().as_dict(),
        "peak": {
            "instruction": peak.instr,
            "line": cfg.instrs[peak.instr].line if peak.instr >= 0 else
            (cfg.instrs[cfg.blocks[peak.block].first].line
             if peak.block >= 0 and cfg.blocks[peak.block].instrs else 0),
            "source": source_of(cfg.instrs[peak.instr].loc, files) if peak.instr >= 0 else None,
            "live": [v["name"] for v in values],
            "values": values,
            "groups": group_by_source(values),
        },
        "peaks": per_line.peaks,
        "budget": budget,
        "budget_from": budget_from,
        "occupancy": occ,
        "unknown_opcodes": sorted({ins.opcode for ins in cfg.instrs if not ins.known}),
        "convention": convention,
        "what_to_change": what_to_change(a, sm, block, block_from, shared=shared,
                                         static_shared=static_shared, scope=scope),
    }
    if lines:
        row.update(per_line.as_dict())
    return row


def _occ(sm: SMProfile, regs: int, block: int, static_shared: int) -> dict:
    return occupancy(sm, regs, block, static_shared).as_dict()


def format_text(rows: list[dict], sm: SMProfile, path: str, max_values: int | None = 12) -> str:
    """The text report; ``max_values`` values at the peak are listed (None: all)."""
    out = [f"{path}: {len(rows)} function(s), target model {sm.name}"]
    for r in rows:
        ml = r["max_live"]
        g = r["interference"]
        out.append(f"{r['kind']} {r['name']}: MaxLive {ml['registers']} registers, "
                   f"{ml['predicates']} predicates ({r['instructions']} instructions)")
        out.append(f"  interference: {g['nodes']} nodes, {g['edges']} edges, density "
                   f"{g['density']:.4f}, max degree {g['max_degree']}, average degree "
                   f"{g['avg_degree']:.1f}, {g['moves']} moves")
        occ = r["occupancy"]
        if r.get("budget") is not None:
            out.append(f"  budget {r['budget']}"
                       + (f" from {r['budget_from']}" if r.get("budget_from") else ""))
        for key, label in (("at_max_live", "at MaxLive"), ("at_budget", "at the budget")):
            if key in occ:
                o = occ[key]
                head = (f"  occupancy {label}: {o['registers']} registers x "
                        f"{o['block_size']} threads")
                if o["occupancy"] is None:
                    out.append(f"{head}: {o['note']}")
                else:
                    out.append(f"{head} -> {o['blocks_per_sm']} blocks, {o['warps_per_sm']} "
                               f"warps per SM ({100 * o['occupancy']:.2f} %, limited by "
                               f"{o['limiter']})")
        pk = r["peak"]
        where = f"instruction {pk['instruction']} (line {pk['line']}"
        where += f", source {format_source(pk['source'])})" if pk["source"] else ")"
        if pk["instruction"] < 0:
            where = f"block entry (line {pk['line']})"
        out.append(f"  peak at {where}: {len(pk['live'])} values live, by the source line "
                   f"that defines them")
        out.extend(_peak_text(pk, max_values))
        out.extend(_change_text(r["what_to_change"]))
        out.append("  distinct peaks: " + "; ".join(
            f"{q['registers']} registers at line {q['first_ptx_line']}"
            + (f"-{q['last_ptx_line']}" if q["last_ptx_line"] != q["first_ptx_line"] else "")
            + (f" ({format_source(q['source'])})" if q["source"] else "")
            for q in r["peaks"]))
        if "lines" in r:
            out.extend(_lines_text(r))
        c = r.get("convention")
        if c:
            used = ", ".join(c["callee_saved_used"]) or "none"
            out.append(f"  calling convention at budget {c['budget']}: "
                       f"{'leaf' if c['leaf'] else 'non-leaf'}, {c['calls']} call(s), "
                       f"{c['tail_calls']} tail call(s), {c['values_live_across_calls']} value(s) "
                       f"live across calls, callee-saved used: {used}, "
                       f"{c['save_restore_bytes']} bytes saved/restored")
        if r["unknown_opcodes"]:
            out.append(f"  unknown opcodes (every operand treated as used and defined): "
                       f"{', '.join(r['unknown_opcodes'])}")
    return "\n".join(out)


def _lines_text(r: dict) -> list[str]:
    """The ``--lines`` part of a function's text report."""
    out = ["  per PTX line (registers, predicates live; source):"]
    for x in r["lines"]:
        out.append(f"    line {x['ptx_line']:>6}: {x['registers']:>4} {x['predicates']:>3}  "
                   f"{format_source(x['source'])}")
    if r["source_lines"]:
        out.append("  per source line (most registers live; instructions):")
        for x in r["source_lines"]:
            out.append(f"    {format_source({'file': x['file'], 'line': x['line']}):<32} "
                       f"{x['max_registers']:>4}  ({x['instructions']} instructions, highest at "
                       f"PTX line {x['ptx_line_of_max']})")
    out.append("  histogram (registers live: instructions):")
    hist = {int(k): v for k, v in r["histogram"].items()}
    widest = max(hist.values(), default=1)
    for k in sorted(hist):
        out.append(f"    {k:>4}: {hist[k]:>6} {'#' * max(1, round(40 * hist[k] / widest))}")
    return out


def _value_text(v: dict) -> str:
    defs = ", ".join(str(x) for x in v["defined_lines"][:3]) or "entry (undefined)"
    nxt = v["next_use_distance"]
    text = (f"      {v['name']:<12} {v['class']:<6} {v['registers']:g} reg, defined line {defs}, "
            f"live {v['live_instructions']} instructions, next use "
            f"{'+' + str(nxt) if nxt is not None else 'none after the peak'}, "
            f"spill cost {v['spill_cost']:g}")
    if v["rematerializable"]:
        text += f"; rematerializable ({v['remat_from']}, cost {v['remat_cost']:g})"
    return text


def _peak_text(pk: dict, max_values: int | None) -> list[str]:
    """The peak's values grouped by defining source line, at most ``max_values`` listed."""
    by_name = {v["name"]: v for v in pk["values"]}
    out = []
    shown = 0
    for g in pk["groups"]:
        if max_values is not None and shown >= max_values:
            break
        where = (format_source(g["source"]) if g["source"] else
                 f"PTX line {g['ptx_line']} (no .loc)" if g["ptx_line"] else "function entry")
        out.append(f"    {where}: {g['registers']:g} registers, {len(g['values'])} value(s)")
        for name in g["values"]:
            if max_values is not None and shown >= max_values:
                break
            out.append(_value_text(by_name[name]))
            shown += 1
    if shown < len(pk["values"]):
        out.append(f"    ... and {len(pk['values']) - shown} more (--peak-values all)")
    return out


def _change_text(c: dict) -> list[str]:
    """What to change for the next occupancy step."""
    o = c["occupancy_now"]
    out = [f"  what to change: at {c['block_size']} threads per block ({c['block_from']}), "
           f"{c['registers_now']} registers give {o['warps_per_sm']} warps per SM "
           f"({100 * (o['occupancy'] or 0):.2f} %)"]
    step = c["next_step"]
    if step is None:
        out.append(f"    {c['note']}")
        return out
    so = step["occupancy"]
    out.append(f"    next step: {step['registers']} registers (shed {step['shed']}) give "
               f"{so['warps_per_sm']} warps per SM ({100 * (so['occupancy'] or 0):.2f} %)")
    if c["candidates"]:
        picks = ", ".join(f"{x['action']} {x['name']} ({x['cost']:g})"
                          for x in c["candidates"][:10])
        if len(c["candidates"]) > 10:
            picks += f", ... {len(c['candidates']) - 10} more (JSON: what_to_change)"
        out.append(f"    cheapest values to shed{'' if c['enough'] else ' (not enough)'}, "
                   f"total cost {c['candidates_cost']:g}: {picks}")
    return out
