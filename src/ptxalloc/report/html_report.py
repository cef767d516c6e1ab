"""``ptxalloc report``: one self-contained HTML page per module (SPEC section 9; issue 15).

Per function: the pressure plot of :mod:`.pressure_plot` (hovering a point names the values
live there), the PTX beside its source lines with a bar of the registers live per line (one
collapsible group per source line, rows where spill code or a recomputation was inserted
coloured), the values live at the peak (:func:`~ptxalloc.analysis.explain_peak.peak_values`),
the spills and why (:func:`~ptxalloc.report.spill_report.explain_spills`, carried in the
allocation's ``extra["spills"]``), occupancy at block sizes 32 to 1024
(:mod:`ptxalloc.target.occupancy`), and the allocation's figures beside ``ptxas -v``'s for the
same input when ptxas was run.

Everything is inline — CSS, SVG, the data the plot's tooltips read (JSON) and a short script
written here — so the page opens with no network. What a person can read is all that is
written: each plot keeps at most ``MAX_POINTS`` points (the highest of each run of lines; fewer,
down to 100, where ``MAX_PAGE_POINTS`` shared by many functions allow no more), a
function's source view at most ``MAX_ROWS`` PTX lines (those around its highest line) and the
page at most ``MAX_PAGE_ROWS`` (later functions keep their plot and tables and say what was
left out), the peak's values and the spills at most ``MAX_VALUES`` rows each; functions after
the first ``OPEN_FUNCTIONS`` start collapsed.
"""

from __future__ import annotations

import json
import os
from html import escape

from ..analysis import analyze_function
from ..analysis.explain_peak import peak_values
from ..analysis.line_pressure import line_pressure
from ..analysis.sources import format_source
from ..target.occupancy import block_size, occupancy
from .pressure_plot import (MAX_POINTS, inserted_marks, occupancy_steps, pressure_series,
                            svg_plot)

MAX_PAGE_POINTS = 12000     # plot points in all plots together (each keeps at least 100)
MAX_ROWS = 1500             # PTX lines in one function's source view
MAX_PAGE_ROWS = 10000       # PTX lines in all source views together
MAX_VALUES = 60             # rows of the peak's values, and of the spills
MAX_SOURCE_BYTES = 4 << 20  # a source file larger than this is not read
OPEN_FUNCTIONS = 8          # functions shown open; the rest start collapsed
BAR_PX = 120                # the live-count bar of the line with the most registers
BLOCK_SIZES = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)

STYLE = """
body{font-family:sans-serif;margin:16px;color:#222;max-width:1200px}
h1{font-size:20px}h2{font-size:16px;margin:0;display:inline}
table{border-collapse:collapse;font-size:12px;margin:6px 0}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0}.num{text-align:right}
details.fn{border:1px solid #bbb;border-radius:4px;margin:10px 0;padding:6px}
details.fn>summary{cursor:pointer}
.src{margin:2px 0}.src>summary{cursor:pointer;font-size:12px;background:#f4f4f4;padding:1px 4px}
.src code.srctext{color:#555;margin-left:8px}
table.ptx td{border:none;padding:0 4px;font-family:monospace;white-space:pre}
table.ptx td.bar{min-width:122px}circle.pt{fill:#1f77b4}.bar span{display:inline-block;height:9px;background:#1f77b4}
tr.spill{background:#ffe0e0}tr.remat{background:#eadff7}tr.peak td.n{font-weight:bold}
.tip{position:fixed;display:none;background:#fffff0;border:1px solid #888;padding:4px 6px;
font:11px monospace;max-width:520px;pointer-events:none;z-index:9}
.note{color:#666;font-size:12px}h3{font-size:14px;margin:10px 0 2px}
.scroll{max-height:260px;overflow:auto;display:inline-block;border:1px solid #eee}
div.source{max-height:420px;overflow:auto;border:1px solid #eee}
"""

# the page's only script: the plot's tooltips and the expand/collapse buttons
SCRIPT = """
(function(){
  var tip=document.getElementById('tip');
  document.querySelectorAll('svg.plot').forEach(function(svg){
    var data=JSON.parse(document.getElementById(svg.id+'-data').textContent);
    var pts=svg.querySelectorAll('circle.pt'), xs=[];
    pts.forEach(function(c){xs.push(+c.getAttribute('cx'));});
    var vb=svg.viewBox.baseVal, last=null;
    svg.addEventListener('mousemove',function(e){
      if(!xs.length)return;
      var r=svg.getBoundingClientRect(), x=(e.clientX-r.left)*vb.width/r.width;
      var lo=0,hi=xs.length-1;
      while(lo<hi){var m=(lo+hi)>>1; if(xs[m]<x)lo=m+1; else hi=m;}
      if(lo>0&&x-xs[lo-1]<xs[lo]-x)lo--;
      if(last)last.setAttribute('r','2');
      last=pts[lo]; last.setAttribute('r','4');
      var n=data.live[lo].map(function(k){return data.names[k];}), more=data.more[lo];
      tip.textContent='line '+data.lines[lo]+': '+data.registers[lo]+' registers, '+
        data.predicates[lo]+' predicates live\\n'+n.join(' ')+(more?' \u2026 and '+more+' more':'');
      tip.style.whiteSpace='pre-wrap';
      tip.style.left=Math.min(e.clientX+14,window.innerWidth-540)+'px';
      tip.style.top=(e.clientY+14)+'px'; tip.style.display='block';
    });
    svg.addEventListener('mouseleave',function(){tip.style.display='none';
      if(last){last.setAttribute('r','2');last=null;}});
  });
  function all(open){document.querySelectorAll('details').forEach(function(d){d.open=open;});}
  document.getElementById('expand').onclick=function(){all(true);};
  document.getElementById('collapse').onclick=function(){all(false);};
})();
"""


def html_report(module, text: str, sm, result=None, refused: dict | None = None,
                ptxas=None, budgets: dict | None = None, functions: list[str] | None = None) -> str:
    """The page for ``module`` parsed from ``text``: ``result`` its ModuleResult (None: not
    allocated), ``refused`` ``{function: why}`` for functions the budget could not allocate,
    ``ptxas`` a :class:`~ptxalloc.ptxas.PtxasResult` of the same input, ``budgets`` the
    RegisterLimit per function (for the functions not allocated); ``functions`` the names
    shown (default: every function)."""
    from ..analysis.sources import source_files
    from ..analysis.static_shared import own_static_shared

    files = source_files(module)
    ptx_lines = text.splitlines()
    allocated = {r.name: r for r in (result.functions if result else [])}
    refused = refused or {}
    sources = _SourceFiles(os.path.dirname(module.filename))
    page_rows = [MAX_PAGE_ROWS]
    sections = []
    fns = [f for f in module.functions if functions is None or f.name in functions]
    points = min(MAX_POINTS, max(100, MAX_PAGE_POINTS // max(1, len(fns))))
    decls = module.declarations()
    for n, fn in enumerate(fns):
        sections.append(_function_section(n, fn, sm, files, ptx_lines, allocated.get(fn.name),
                                          refused.get(fn.name), ptxas, budgets, sources,
                                          page_rows, points, own_static_shared(fn, decls)))
    head = module.filename
    summary = _module_table(fns, allocated, refused, ptxas)
    if ptxas is None:
        ptxas_note = "ptxas: not run (not on the PATH, or --no-ptxas)"
    elif ptxas.ok:
        ptxas_note = f"ptxas -v ran on the input in {ptxas.seconds:.2f} s"
    else:
        said = [x for x in ptxas.output.splitlines() if x.strip()]
        first = next((x for x in said if "error" in x.lower() or "fatal" in x.lower()),
                     said[0] if said else "")
        ptxas_note = f"ptxas failed on the input ({first[:200]}): no ptxas figures"
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>ptxalloc report: {escape(head)}</title><style>{STYLE}</style></head><body>\n",
        f"<h1>ptxalloc report: {escape(head)}</h1>\n",
        f"<p class=\"note\">{len(fns)} function(s), target model {escape(sm.name)}; "
        f"{escape(ptxas_note)}. ptxas allocates registers again when it assembles: ptxalloc's "
        f"figures model its allocators and measure pressure, they do not bound the SASS "
        f"register count. <button id=\"expand\">expand all</button> "
        f"<button id=\"collapse\">collapse all</button></p>\n",
        summary, "\n".join(sections),
        f"<div id=\"tip\" class=\"tip\"></div>\n<script>{SCRIPT}</script>\n</body></html>\n"])


def _module_table(fns, allocated, refused, ptxas) -> str:
    rows = ["<table class=\"summary\"><tr><th>function</th><th>ptxalloc registers</th>"
            "<th>spill stores / loads (bytes)</th><th>ptxas registers</th>"
            "<th>ptxas spill stores / loads</th></tr>"]
    for n, fn in enumerate(fns):
        r = allocated.get(fn.name)
        mine = (f"{r.registers}", f"{r.spill_stores_bytes} / {r.spill_loads_bytes}") if r else \
            ("refused" if fn.name in refused else "-", "-")
        theirs = _ptxas_figures(ptxas, fn.name)
        rows.append(f"<tr><td><a href=\"#fn{n}\">{escape(fn.name)}</a></td>"
                    f"<td class=\"num\">{mine[0]}</td><td class=\"num\">{mine[1]}</td>"
                    f"<td class=\"num\">{_or_dash(theirs and theirs.registers)}</td>"
                    f"<td class=\"num\">{_or_dash(theirs and theirs.spill_stores)} / "
                    f"{_or_dash(theirs and theirs.spill_loads)}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _or_dash(x) -> str:
    return "-" if x is None or x is False else str(x)


def _ptxas_figures(ptxas, name: str):
    return ptxas.functions.get(name) if ptxas is not None and ptxas.ok else None


def _function_section(n: int, fn, sm, files, ptx_lines, fr, refusal, ptxas, budgets, sources,
                      page_rows: list[int], points: int, static_shared: int) -> str:
    a = analyze_function(fn, sm)
    per_line = line_pressure(a.cfg, a.pressure, files)
    series = pressure_series(a, per_line, points)
    block = block_size(fn.directives)
    budget = fr.budget if fr else (budgets[fn.name].registers if budgets else None)
    series.budget = budget
    series.steps = occupancy_steps(sm, block, 255, static_shared)
    series.marks = inserted_marks(fr.function) if fr and fr.function is not None else []
    ident = f"plot{n}"
    out = [f"<section class=\"function\" id=\"fn{n}\" data-name=\"{escape(fn.name)}\">",
           f"<details class=\"fn\"{' open' if n < OPEN_FUNCTIONS else ''}><summary>"
           f"<h2>{escape(fn.kind)} {escape(fn.name)}</h2> — MaxLive {a.pressure.max_live} "
           f"registers, {a.pressure.max_preds} predicates, {len(a.cfg.instrs)} instructions"
           "</summary>"]
    if refusal:
        out.append(f"<p class=\"note\">not allocated at budget {budget}: {escape(refusal)}</p>")
    out.append(_figures_table(a, fr, _ptxas_figures(ptxas, fn.name), budget))
    out.append(svg_plot(series, ident=ident))
    data = json.dumps(series.as_dict(), separators=(",", ":")).replace("</", "<\\/")
    out.append(f"<script type=\"application/json\" id=\"{ident}-data\">{data}</script>")
    out.append(_source_view(per_line, ptx_lines, series.marks, files, sources, page_rows))
    out.append(_peak_table(a, files))
    if fr is not None:
        out.append(_spill_table(fr.extra.get("spills", {}).get("values", [])))
    out.append(_occupancy_table(sm, a.pressure.max_live, fr, _ptxas_figures(ptxas, fn.name),
                                block, static_shared))
    out.append("</details></section>")
    return "\n".join(out)


def _figures_table(a, fr, theirs, budget) -> str:
    cells = [("MaxLive (as written)", a.pressure.max_live, None),
             ("budget", budget, None)]
    if fr is not None:
        cells += [("registers", fr.registers, theirs and theirs.registers),
                  ("predicates", fr.predicates, None),
                  ("spill stores (bytes)", fr.spill_stores_bytes, theirs and theirs.spill_stores),
                  ("spill loads (bytes)", fr.spill_loads_bytes, theirs and theirs.spill_loads),
                  ("stack frame (bytes)", fr.stack_frame_bytes, theirs and theirs.stack),
                  ("values spilled", fr.spilled_values, None),
                  ("rematerialized", fr.rematerialized, None),
                  ("moves coalesced", f"{fr.moves_coalesced} of {fr.moves}", None)]
    rows = ["<table class=\"figures\"><tr><th></th><th>ptxalloc"
            + (f" ({escape(fr.allocator)})" if fr else "") + "</th><th>ptxas -v</th></tr>"]
    for label, mine, other in cells:
        rows.append(f"<tr><td>{label}</td><td class=\"num\">{_or_dash(mine)}</td>"
                    f"<td class=\"num\">{_or_dash(other)}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _peak_table(a, files) -> str:
    values = peak_values(a, files)
    rows = [f"<h3>Values live at the peak ({len(values)})</h3><div class=\"scroll\">"
            "<table class=\"peakvalues\">"
            "<tr><th>value</th><th>class</th><th>registers</th><th>defined (PTX line)</th>"
            "<th>source</th><th>last use</th><th>live (instructions)</th><th>next use</th>"
            "<th>spill cost</th><th>rematerializable</th></tr>"]
    for v in values[:MAX_VALUES]:
        src = next((s for s in v["defined_source"] if s), None)
        nxt = v["next_use_distance"]
        rows.append(f"<tr><td>{escape(v['name'])}</td><td>{v['class']}</td>"
                    f"<td class=\"num\">{v['registers']:g}</td>"
                    f"<td>{', '.join(map(str, v['defined_lines'][:3])) or 'entry'}</td>"
                    f"<td>{escape(format_source(src))}</td><td>{v['last_use_line']}</td>"
                    f"<td class=\"num\">{v['live_instructions']}</td>"
                    f"<td class=\"num\">{'+' + str(nxt) if nxt is not None else '-'}</td>"
                    f"<td class=\"num\">{v['spill_cost']:g}</td>"
                    f"<td>{escape(v.get('remat_from', '')) if v['rematerializable'] else ''}"
                    "</td></tr>")
    rows.append("</table></div>")
    if len(values) > MAX_VALUES:
        rows.append(f"<p class=\"note\">... and {len(values) - MAX_VALUES} more "
                    f"(analyze --peak-values all)</p>")
    return "\n".join(rows)


def _spill_table(values: list[dict]) -> str:
    if not values:
        return "<h3>Spills</h3><p class=\"note\">nothing spilled or rematerialized</p>"
    rows = [f"<h3>Spills ({len(values)} values)</h3><div class=\"scroll\"><table "
            "class=\"spills\"><tr><th>value"
            "</th><th>class</th><th>stores</th><th>reloads</th><th>recomputed</th>"
            "<th>loop depth</th><th>cost</th><th>why</th><th>defined</th></tr>"]
    for v in values[:MAX_VALUES]:
        defined = ", ".join(f"{d['ptx_line']}" + (f" ({format_source(d['source'])})"
                                                 if d["source"] else "")
                            for d in v["defined"][:3])
        rows.append(f"<tr><td>{escape(v['name'])}</td><td>{v['class']}</td>"
                    f"<td class=\"num\">{v['stores']}</td><td class=\"num\">{v['reloads']}</td>"
                    f"<td class=\"num\">{v['recomputations']}</td>"
                    f"<td class=\"num\">{v['loop_depth']}</td>"
                    f"<td class=\"num\">{v['spill_cost']:g}</td><td>{escape(v['why'])}</td>"
                    f"<td>{escape(defined)}</td></tr>")
    rows.append("</table></div>")
    if len(values) > MAX_VALUES:
        rows.append(f"<p class=\"note\">... and {len(values) - MAX_VALUES} more (allocate -v)"
                    "</p>")
    return "\n".join(rows)


def _occupancy_table(sm, max_live: int, fr, theirs, block: int, static_shared: int) -> str:
    columns = [("MaxLive", max_live)]
    if fr is not None:
        columns.append(("ptxalloc", fr.registers))
    if theirs is not None and theirs.registers is not None:
        columns.append(("ptxas", theirs.registers))
    shared = f", {static_shared} bytes of .shared a block" if static_shared else ""
    rows = [f"<h3>Occupancy (warps per SM of {sm.max_warps}; this function's block size "
            f"{block}{shared})</h3><table class=\"occupancy\"><tr><th>threads per block</th>"
            + "".join(f"<th>{label}: {regs} registers</th>" for label, regs in columns)
            + "</tr>"]
    for b in BLOCK_SIZES:
        cells = []
        for _, regs in columns:
            o = occupancy(sm, regs, b, static_shared)
            cells.append("<td>exceeds 255: must spill</td>" if o.must_spill else
                         f"<td>{o.warps_per_sm} warps, {100 * o.fraction:.0f} % "
                         f"({o.limiter})</td>")
        mark = " style=\"font-weight:bold\"" if b == block else ""
        rows.append(f"<tr{mark}><td class=\"num\">{b}</td>{''.join(cells)}</tr>")
    rows.append("</table>")
    return "\n".join(rows)


class _SourceFiles:
    """The text of the source files ``.file`` names, read once each: the path as written, else
    its last component beside the PTX file; None where neither can be read."""

    def __init__(self, ptx_dir: str):
        self.ptx_dir = ptx_dir
        self.cache: dict[str, list[str] | None] = {}

    def line(self, path: str, number: int) -> str | None:
        if path not in self.cache:
            self.cache[path] = self._read(path)
        text = self.cache[path]
        if text is None or not 1 <= number <= len(text):
            return None
        return text[number - 1].strip()

    def _read(self, path: str) -> list[str] | None:
        for p in (path, os.path.join(self.ptx_dir, os.path.basename(path))):
            try:
                if os.path.isfile(p) and os.path.getsize(p) <= MAX_SOURCE_BYTES:
                    with open(p, encoding="utf-8", errors="replace") as f:
                        return f.read().splitlines()
            except OSError:
                continue
        return None


def _source_view(per_line, ptx_lines: list[str], marks, files, sources,
                 page_rows: list[int]) -> str:
    """The PTX lines grouped by source line, each with its live-count bar."""
    figs = per_line.lines
    allowed = min(MAX_ROWS, page_rows[0])
    head = f"<h3>PTX beside its source lines ({len(figs)} lines"
    if allowed <= 0:
        return head + ")</h3><p class=\"note\">left out: the page's limit of " \
            f"{MAX_PAGE_ROWS} lines is spent (report this function alone with --function)</p>"
    # a long function shows the lines around its highest one
    top_at = max(range(len(figs)), key=lambda i: (figs[i].registers, -i), default=0)
    start = min(max(0, top_at - allowed // 2), max(0, len(figs) - allowed))
    shown = figs[start:start + allowed]
    page_rows[0] -= len(shown)
    kinds: dict[int, str] = {}
    for line, kind in marks:
        if kind in ("store", "reload"):
            kinds[line] = "spill"
        else:
            kinds.setdefault(line, "remat")
    top = max((f.registers for f in figs), default=1) or 1
    out = [head + (f"; the {len(shown)} around the highest shown, PTX lines "
                   f"{shown[0].ptx_line}-{shown[-1].ptx_line}" if len(shown) < len(figs) else "")
           + ")</h3><div class=\"source\">"]
    group_key = None
    for k, f in enumerate(shown):
        src = f.source
        key = (src["file"], src["line"], str(src.get("inlined_at"))) if src else ()
        if k == 0 or key != group_key:
            if k:
                out.append("</table></details>")
            group_key = key
            out.append(_group_head(src, sources))
        cls = kinds.get(f.ptx_line, "")
        if f.registers == top:
            cls = (cls + " peak").strip()
        text = ptx_lines[f.ptx_line - 1].strip() if 0 < f.ptx_line <= len(ptx_lines) else ""
        width = round(BAR_PX * f.registers / top)
        attr = f' class="{cls}"' if cls else ""
        out.append(f"<tr{attr}><td>{f.ptx_line}</td><td class="
                   f"\"bar\"><span style=\"width:{width}px\"></span></td><td class=\"n\">"
                   f"{f.registers}/{f.predicates}</td><td>{escape(text[:160])}</td></tr>")
    if shown:
        out.append("</table></details>")
    out.append("</div>")
    if len(shown) < len(figs):
        out.append(f"<p class=\"note\">{len(figs) - len(shown)} more lines left out (the plot "
                   f"covers them all; analyze --lines lists every line)</p>")
    return "\n".join(out)


def _group_head(src, sources) -> str:
    """The ``<details>`` opening one source line's group of PTX lines."""
    if src is None:
        label, text = "no source line (.loc)", None
    else:
        label = format_source(src)
        text = sources.line(src["file"], src["line"])
    code = f"<code class=\"srctext\">{escape(text[:160])}</code>" if text else ""
    return (f"<details class=\"src\" open><summary>{escape(label)}{code}</summary>"
            "<table class=\"ptx\">")
