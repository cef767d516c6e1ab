"""Register pressure over the program as a picture (SPEC section 9; issue 15): the series of
registers and predicates live per PTX line that ``analyze --plot`` draws and ``report`` embeds,
and the SVG that draws it.

:func:`pressure_series` takes a function's per-line figures
(:func:`ptxalloc.analysis.line_pressure.line_pressure`) and keeps at most ``max_points`` of them:
a long function is cut into that many equal runs of lines and each run keeps its highest line,
so no peak is lost. Each kept point names the values live there (live after its instruction of
highest pressure, with what that instruction defines), at most ``MAX_NAMES`` of them.

:func:`svg_plot` draws a series: registers as a line with a dot per point (``circle.pt``, in the
order of the series), predicates as a second line, the budget K and the register
counts where occupancy steps (at the function's block size) as horizontal lines, spill stores,
reloads and rematerializations as marks along the top, and the distinct peaks labelled. The SVG
is written here, by hand, so that the report needs nothing at run time.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from html import escape

from ..ir.registers import RegClass
from ..target.occupancy import occupancy
from ..util import bits

MAX_POINTS = 400            # points per function's plot
MAX_NAMES = 32              # live values named per point
_DIGITS = re.compile(r"\d+$")

# what the allocation inserted, by the kind of its Edit (ptxalloc.ir.edits), and how it is drawn
MARKS = {"spill": "store", "pspill": "store", "reload": "reload", "preload": "reload",
         "remat": "remat"}
MARK_COLOURS = {"store": "#d62728", "reload": "#2ca02c", "remat": "#9467bd"}


@dataclass
class Series:
    """One function's plot: per kept point its PTX line, registers and predicates live, and
    the live values' names (``more``: how many were left unnamed)."""

    name: str
    lines: list[int]
    registers: list[int]
    predicates: list[int]
    live: list[list[str]]
    more: list[int]
    total_lines: int                                   # PTX lines before sampling
    budget: int | None = None
    steps: list[dict] = field(default_factory=list)    # occupancy steps
    marks: list[tuple[int, str]] = field(default_factory=list)   # (PTX line, store|reload|remat)
    peaks: list[dict] = field(default_factory=list)

    @property
    def sampled(self) -> bool:
        return self.total_lines > len(self.lines)

    def as_dict(self) -> dict:
        """What the report's script reads: per point its line, counts and live values, each
        value as its index in ``names`` (a name is written once per function)."""
        names = sorted({n for live in self.live for n in live}, key=_natural)
        index = {n: k for k, n in enumerate(names)}
        return {"name": self.name, "lines": self.lines, "registers": self.registers,
                "predicates": self.predicates, "names": names,
                "live": [[index[n] for n in live] for live in self.live], "more": self.more}


def sample(values: list[int], count: int) -> list[int]:
    """Indices of at most ``count`` of ``values``: each of ``count`` equal runs keeps its
    highest (first of equals), so every maximum of the whole survives."""
    n = len(values)
    if n <= count:
        return list(range(n))
    keep = []
    for k in range(count):
        lo, hi = k * n // count, (k + 1) * n // count
        best = lo
        for i in range(lo + 1, hi):
            if values[i] > values[best]:
                best = i
        keep.append(best)
    return keep


def occupancy_steps(sm, block: int, up_to: int, static_shared: int = 0) -> list[dict]:
    """The register counts (at most ``up_to``) above which occupancy falls at ``block``
    threads and ``static_shared`` bytes of shared memory a block: ``{"registers",
    "occupancy"}`` with the occupancy at that count."""
    out = []
    prev = occupancy(sm, 1, block, static_shared)
    for r in range(2, min(up_to, 255) + 1):
        now = occupancy(sm, r, block, static_shared)
        if now.warps_per_sm < prev.warps_per_sm:
            out.append({"registers": r - 1, "occupancy": round(prev.fraction, 4)})
        prev = now
    return out


def pressure_series(a, per_line, max_points: int = MAX_POINTS) -> Series:
    """The plot of one function from its analysis ``a`` and its per-line figures."""
    figs = per_line.lines
    keep = sample([f.registers for f in figs], max_points)
    gpr = a.pressure.gpr
    chosen: dict[int, int] = {}          # instruction id -> point
    for k, j in enumerate(keep):
        ids = figs[j].instructions
        chosen[max(ids, key=lambda i: (gpr[i], -i))] = k
    regs = a.fn.regs
    live: list[list[str]] = [[] for _ in keep]
    more = [0] * len(keep)
    for b in a.cfg.blocks:
        if not any(b.first <= i < b.first + len(b.instrs) for i in chosen):
            continue
        after = a.liveness.live_after(b.id)
        for k_in, ins in enumerate(b.instrs):
            point = chosen.get(b.first + k_in)
            if point is None:
                continue
            here = after[k_in]
            for d in ins.defs:
                here |= 1 << d
            names = sorted(bits(here), key=lambda v: (regs.classes[v] == RegClass.PRED,
                                                      _natural(regs.names[v])))
            live[point] = [regs.names[v] for v in names[:MAX_NAMES]]
            more[point] = max(0, len(names) - MAX_NAMES)
    return Series(a.fn.name, [figs[j].ptx_line for j in keep],
                  [figs[j].registers for j in keep], [figs[j].predicates for j in keep],
                  live, more, len(figs), peaks=per_line.peaks)


def _natural(name: str) -> tuple:
    """``%r2`` before ``%r10``."""
    m = _DIGITS.search(name)
    return (name[:m.start()], int(m.group()), name) if m else (name, -1, name)


def inserted_marks(allocated) -> list[tuple[int, str]]:
    """(PTX line, store|reload|remat) of every spill instruction an allocation inserted (they
    carry the line of the instruction they serve); ``allocated`` the allocated Function."""
    out = []
    for ins in allocated.instructions():
        o = ins.origin
        if o is not None and o.kind.value in MARKS:
            out.append((ins.line, MARKS[o.kind.value]))
    return out


def svg_plot(s: Series, width: int = 900, height: int = 260, ident: str = "") -> str:
    """The SVG of a series (module docstring); ``ident`` names it in the page."""
    left, right, top, bottom = 44, 16, 22, 30
    w, h = width - left - right, height - top - bottom
    ymax = _y_top(s)
    x0, x1 = (s.lines[0], s.lines[-1]) if s.lines else (0, 1)
    span = max(1, x1 - x0)

    def x(line: int) -> float:
        return round(left + (line - x0) * w / span, 1)

    def y(v: float) -> float:
        return round(top + h - v * h / ymax, 1)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" id="{escape(ident)}" '
           f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-family="sans-serif" font-size="10">',
           f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#fafafa" '
           f'stroke="#ccc"/>']
    for t in _ticks(ymax):
        out.append(f'<text x="{left - 4}" y="{y(t) + 3}" text-anchor="end">{t}</text>')
    for t in _ticks(span, 6):
        out.append(f'<text x="{x(x0 + t)}" y="{top + h + 14}" text-anchor="middle">'
                   f'{x0 + t}</text>')
    out.append(f'<text x="{left + w / 2}" y="{height - 2}" text-anchor="middle">PTX line'
               + (f' ({len(s.lines)} of {s.total_lines} lines: the highest of each run)'
                  if s.sampled else '') + '</text>')
    last_y = None
    for st in s.steps:           # from the fewest registers up; one every 14 pixels at most
        yy = y(st["registers"])
        if st["registers"] < ymax and (last_y is None or last_y - yy >= 14):
            last_y = yy
            out.append(f'<line class="step" x1="{left}" x2="{left + w}" y1="{yy}" y2="{yy}" '
                       f'stroke="#999" stroke-dasharray="2,3"/><text x="{left + w - 2}" '
                       f'y="{yy - 2}" text-anchor="end" fill="#777">'
                       f'{100 * st["occupancy"]:.0f} % at \u2264{st["registers"]}</text>')
    if s.budget is not None:
        yy = y(min(s.budget, ymax))
        label = f"K = {s.budget}" + ("" if s.budget <= ymax else " (above)")
        out.append(f'<line class="budget" x1="{left}" x2="{left + w}" y1="{yy}" y2="{yy}" '
                   f'stroke="#d62728" stroke-width="1.5"/><text x="{left + 4}" y="{yy - 3}" '
                   f'fill="#d62728">{label}</text>')
    if s.lines:
        out.append(_polyline(s.lines, s.predicates, x, y, "#ff7f0e", "predicates"))
        out.append(_polyline(s.lines, s.registers, x, y, "#1f77b4", "registers"))
    seen = set()
    for line, kind in s.marks:
        if (line, kind) in seen or not x0 <= line <= x1:
            continue
        seen.add((line, kind))
        xx = x(line)
        colour = MARK_COLOURS[kind]
        yy = top + 6 if kind == "store" else top + 12 if kind == "reload" else top + 18
        out.append(f'<path class="mark {kind}" d="M{xx - 3},{yy - 4}h6l-3,5z" '
                   f'fill="{colour}"><title>{kind} at line {line}</title></path>')
    for line, regs in zip(s.lines, s.registers):
        out.append(f'<circle class="pt" cx="{x(line)}" cy="{y(regs)}" r="2"/>')
    for p in s.peaks[:3]:
        xx = x(p["first_ptx_line"])
        out.append(f'<text class="peak" x="{xx}" y="{y(p["registers"]) - 6}" '
                   f'text-anchor="middle" font-weight="bold">{p["registers"]} @ '
                   f'{p["first_ptx_line"]}</text>')
    out.append(f'<text x="{left + w}" y="{top - 8}" text-anchor="end"><tspan fill="#1f77b4">'
               f'\u25a0 registers'
               f'</tspan> <tspan fill="#ff7f0e">\u25a0 predicates</tspan> <tspan '
               f'fill="#d62728">\u25bc store</tspan> <tspan fill="#2ca02c">\u25bc reload'
               f'</tspan> <tspan fill="#9467bd">\u25bc remat</tspan></text>')
    out.append('</svg>')
    return "\n".join(out)


def _fill_points(svg: str) -> str:
    """The points filled in the SVG itself (a standalone picture has no page style)."""
    return svg.replace('<circle class="pt" ', '<circle class="pt" fill="#1f77b4" ')


def _y_top(s: Series) -> int:
    """The top of a plot's axis: 15 % above the highest count, raised to show the budget
    when it is at most half as high again (a budget of 255 over a MaxLive of 30 is only
    labelled, at the top)."""
    ymax = max(8, math.ceil(max(s.registers + s.predicates, default=0) * 1.15))
    if s.budget is not None and s.budget <= ymax * 1.5:
        ymax = max(ymax, s.budget + 2)
    return ymax


def _polyline(xs, ys, x, y, colour: str, cls: str) -> str:
    pts = " ".join(f"{x(a)},{y(b)}" for a, b in zip(xs, ys))
    return (f'<polyline class="{cls}" points="{pts}" fill="none" stroke="{colour}" '
            f'stroke-width="1.4"/>')


def _ticks(span: float, count: int = 5) -> list[int]:
    """About ``count`` round tick values from 0 to ``span``."""
    raw = max(1, span / count)
    mag = 10 ** int(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return list(range(0, int(span) + 1, step))


def svg_document(plots: list[tuple[str, str]]) -> str:
    """A standalone SVG stacking the plots (``(title, svg)`` pairs) one under another:
    ``analyze --plot``."""
    height = 0
    parts = []
    for title, svg in plots:
        parts.append(f'<text x="8" y="{height + 16}" font-family="sans-serif" font-size="13" '
                     f'font-weight="bold">{escape(title)}</text>')
        parts.append(f'<g transform="translate(0,{height + 20})">{_fill_points(svg)}</g>')
        height += 20 + int(svg.split('height="', 1)[1].split('"', 1)[0])
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height}" '
            f'viewBox="0 0 900 {height}">\n<rect width="900" height="{height}" fill="white"/>\n'
            + "\n".join(parts) + "\n</svg>\n")


def png_plot(series: list[Series]) -> bytes:
    """The plots as one PNG, drawn by matplotlib (the optional extra ``[plot]``); a
    UsageError naming the extra when it is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from ..errors import UsageError
        raise UsageError("--plot: a PNG needs matplotlib, which is not installed: pip install "
                         "'ptxalloc[plot]' (or name an .svg, which needs nothing)") from None
    import io

    fig, axes = plt.subplots(len(series) or 1, 1, figsize=(9, 2.8 * max(1, len(series))),
                             squeeze=False)
    for ax, s in zip(axes[:, 0], series):
        ax.plot(s.lines, s.registers, color="#1f77b4", lw=1, label="registers")
        ax.plot(s.lines, s.predicates, color="#ff7f0e", lw=1, label="predicates")
        ymax = _y_top(s)
        if s.budget is not None and s.budget <= ymax:
            ax.axhline(s.budget, color="#d62728", lw=1.2, label=f"K = {s.budget}")
        for st in s.steps:
            if st["registers"] < ymax:
                ax.axhline(st["registers"], color="#999", lw=0.6, ls=":")
        for p in s.peaks[:3]:
            ax.annotate(f"{p['registers']} @ {p['first_ptx_line']}",
                        (p["first_ptx_line"], p["registers"]), ha="center", fontsize=7,
                        xytext=(0, 4), textcoords="offset points")
        ax.set_ylim(0, ymax)
        ax.set_title(f"{s.name}: MaxLive {max(s.registers, default=0)}", fontsize=9)
        ax.set_xlabel("PTX line" + (f" ({len(s.lines)} of {s.total_lines} lines)"
                                    if s.sampled else ""), fontsize=8)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out.getvalue()
