"""The ``analyze`` report: per function MaxLive, interference statistics, the pressure peak with
the values live there (where each is defined and last used, with ``.loc`` source lines), the top
pressure points, and what the register count means for occupancy (SPEC section 9)."""

from __future__ import annotations

from ..analysis import FunctionAnalysis
from ..analysis.line_pressure import line_pressure
from ..analysis.sources import format_source, source_of
from ..target.occupancy import block_size, occupancy
from ..target.sm import SMProfile


def function_row(a: FunctionAnalysis, sm: SMProfile, budget: int | None, top: int = 5,
                 convention: dict | None = None, budget_from: str | None = None,
                 files: dict[int, str] | None = None, lines: bool = False) -> dict:
    """One function's analysis; ``budget`` (with ``budget_from``, where it came from) is the
    budget its occupancy is also shown at; ``files`` the module's ``.file`` table; ``lines``
    adds the per-line figures (``lines``, ``source_lines``, ``histogram``)."""
    fn = a.fn
    files = files or {}
    per_line = line_pressure(a.cfg, a.pressure, files, top)
    p = a.pressure
    cfg = a.cfg
    peak = p.peak
    live = p.describe(peak.live)
    live.sort(key=lambda lv: (lv.defined_at[:1] or [-1])[0])
    block = block_size(fn.directives)
    occ = {"block_size": block, "at_max_live": _occ(sm, p.max_live, block)}
    if budget is not None:
        occ["at_budget"] = _occ(sm, budget, block)
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
            "live": [lv.name for lv in live],
            "values": [{
                "name": lv.name, "class": lv.rclass,
                "defined_lines": lv.def_lines, "defined_source": [source_of(x, files) for x in lv.def_source],
                "last_use_line": lv.last_use_line,
            } for lv in live],
        },
        "peaks": per_line.peaks,
        "budget": budget,
        "budget_from": budget_from,
        "occupancy": occ,
        "unknown_opcodes": sorted({ins.opcode for ins in cfg.instrs if not ins.known}),
        "convention": convention,
    }
    if lines:
        row.update(per_line.as_dict())
    return row


def _occ(sm: SMProfile, regs: int, block: int) -> dict:
    return occupancy(sm, regs, block).as_dict()


def format_text(rows: list[dict], sm: SMProfile, path: str, max_values: int = 12) -> str:
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
        out.append(f"  peak at {where}: {len(pk['live'])} values live")
        for v in pk["values"][:max_values]:
            places = list(dict.fromkeys(format_source(s) for s in v["defined_source"] if s))
            src = f" [{', '.join(places[:3])}{', ...' if len(places) > 3 else ''}]" \
                if places else ""
            defs = ", ".join(str(x) for x in v["defined_lines"][:3]) or "entry (undefined)"
            out.append(f"    {v['name']:<14} {v['class']:<6} defined line {defs}{src}, "
                       f"last used line {v['last_use_line'] or '-'}")
        if len(pk["values"]) > max_values:
            out.append(f"    ... and {len(pk['values']) - max_values} more")
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
