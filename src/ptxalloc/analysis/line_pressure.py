"""Register pressure per PTX line and per source line, its histogram and its distinct peaks
(seed 002 "Register Allocation Statistics"; SPEC section 9, the ``analyze --lines`` view).

A PTX line's pressure is the largest of :class:`~ptxalloc.analysis.pressure.Pressure`'s figures
for the instructions on it, in whole 32-bit registers (two live 16-bit halves make one); the
first instruction of a block also carries the pressure of the block's live-in set, so that the
largest line is MaxLive. A source line's figure is the largest over the instructions its
``.loc`` names; code inlined from elsewhere counts for its own line and for every line it was
inlined at. The histogram counts instructions by pressure. A peak is a run of consecutive
lines at one pressure whose neighbours on both sides are lower: the adjacent lines of one
plateau are one peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .sources import source_of


@dataclass
class LineFigure:
    ptx_line: int
    source: dict | None
    registers: int
    predicates: int
    instructions: list[int] = field(default_factory=list)    # instruction ids on the line

    def as_dict(self) -> dict:
        return {"ptx_line": self.ptx_line, "source": self.source,
                "registers": self.registers, "predicates": self.predicates}


class LinePressure:
    """The per-line view: PTX lines in order with their figures (``ptx_lines``,
    ``registers``, ``predicates``), the source lines, the histogram and the distinct peaks.
    :attr:`lines` (a :class:`LineFigure` per line, with its source and instruction ids) is
    built on first use: ``analyze`` without ``--lines`` prints only the peaks (issue 16)."""

    def __init__(self, ptx_lines: list[int], registers: list[int], predicates: list[int],
                 members: list, sources: list, source_lines: list[dict],
                 histogram: dict[int, int], peaks: list[dict]):
        self.ptx_lines = ptx_lines
        self.registers = registers
        self.predicates = predicates
        self._members = members          # per line: its instruction id, or a list of them
        self._sources = sources          # per line: its first instruction's source, or None
        self.source_lines = source_lines
        self.histogram = histogram
        self.peaks = peaks
        self._lines: list[LineFigure] | None = None

    @property
    def lines(self) -> list[LineFigure]:
        """One :class:`LineFigure` per PTX line, in order (built on first use)."""
        if self._lines is None:
            self._lines = [LineFigure(ln, src, r, p, ids if type(ids) is list else [ids])
                           for ln, src, r, p, ids in zip(self.ptx_lines, self._sources,
                                                         self.registers, self.predicates,
                                                         self._members)]
        return self._lines

    def as_dict(self) -> dict:
        return {"lines": [x.as_dict() for x in self.lines],
                "source_lines": self.source_lines,
                "histogram": {str(k): v for k, v in sorted(self.histogram.items())},
                "peaks": self.peaks}


def line_pressure(cfg, pressure, files: dict[int, str], max_peaks: int = 5) -> LinePressure:
    """The per-line view of one function's pressure; ``files`` is the module's ``.file``
    table (:func:`~ptxalloc.analysis.sources.source_files`)."""
    instrs = cfg.instrs
    gpr = pressure.gpr
    pred = pressure.pred
    entry_of = {b.first: b.id for b in cfg.blocks if b.instrs}
    # per PTX line (in the order first met): its slot in parallel lists
    slot: dict[int, int] = {}
    ptx_lines: list[int] = []
    registers: list[int] = []
    predicates: list[int] = []
    members: list = []
    sources: list = []
    histogram: dict[int, int] = {}
    per_source: dict[tuple, list] = {}
    ceil = math.ceil
    for i, ins in enumerate(instrs):
        regs = gpr[i]
        preds = pred[i]
        b = entry_of.get(i)
        if b is not None:
            regs = max(regs, pressure.entry_gpr[b])
            preds = max(preds, pressure.entry_pred[b])
        whole = ceil(regs)
        histogram[whole] = histogram.get(whole, 0) + 1
        line = ins.line
        loc = ins.loc
        src = None if loc is None else source_of(loc, files)
        k = slot.get(line)
        if k is None:
            slot[line] = len(ptx_lines)
            ptx_lines.append(line)
            registers.append(whole)
            predicates.append(preds)
            members.append(i)
            sources.append(src)
        else:
            if whole > registers[k]:
                registers[k] = whole
            if preds > predicates[k]:
                predicates[k] = preds
            ids = members[k]
            if type(ids) is list:
                ids.append(i)
            else:
                members[k] = [ids, i]
        if src is not None:
            places = [(src["file"], src["line"])]
            places += [(at["file"], at["line"]) for at in src.get("inlined_at", ())]
            for key in places:
                row = per_source.get(key)
                if row is None:
                    per_source[key] = [whole, preds, 1, line]
                else:
                    if whole > row[0]:
                        row[0] = whole
                        row[3] = line
                    row[1] = max(row[1], preds)
                    row[2] += 1
    order = sorted(range(len(ptx_lines)), key=ptx_lines.__getitem__)
    if order != list(range(len(order))):
        ptx_lines, registers, predicates, members, sources = (
            [col[k] for k in order] for col in (ptx_lines, registers, predicates, members,
                                                 sources))
    source_lines = [{"file": f, "line": ln, "max_registers": r[0], "max_predicates": r[1],
                     "instructions": r[2], "ptx_line_of_max": r[3]}
                    for (f, ln), r in sorted(per_source.items())]
    peaks = distinct_peaks(ptx_lines, registers, sources, max_peaks)
    return LinePressure(ptx_lines, registers, predicates, members, sources, source_lines,
                        histogram, peaks)


def distinct_peaks(ptx_lines: list[int], registers: list[int], sources: list,
                   count: int) -> list[dict]:
    """The ``count`` highest distinct peaks of the line sequence (per line in order: its PTX
    line, registers and source), highest first, then earliest: ``{"registers",
    "first_ptx_line", "last_ptx_line", "source"}``.

    A plateau (consecutive lines at one pressure, both neighbours lower) is a candidate; two
    neighbouring candidates are one peak unless the pressure between them drops by at least
    :func:`dip` below the lower of the two (a saw-tooth 74, 73, 74, 73 is one peak). The merged
    peak spans both and keeps the location of its first highest plateau."""
    n = len(registers)
    found = []                  # [height, first index, last index, index of the top]
    i = 0
    while i < n:
        j = i
        height = registers[i]
        while j + 1 < n and registers[j + 1] == height:
            j += 1
        left = registers[i - 1] if i > 0 else -1
        right = registers[j + 1] if j + 1 < n else -1
        if left < height and right < height:
            found.append([height, i, j, i])
        i = j + 1
    merged: list[list[int]] = []
    for pk in found:
        if merged:
            last = merged[-1]
            valley = min(registers[last[2] + 1:pk[1]])
            if valley > min(last[0], pk[0]) - dip(min(last[0], pk[0])):
                if pk[0] > last[0]:
                    last[0], last[3] = pk[0], pk[3]
                last[2] = pk[2]
                continue
        merged.append(pk)
    peaks = [{"registers": h, "first_ptx_line": ptx_lines[a],
              "last_ptx_line": ptx_lines[b], "source": sources[top]}
             for h, a, b, top in merged]
    peaks.sort(key=lambda p: (-p["registers"], p["first_ptx_line"]))
    return peaks[:count]


def dip(height: int) -> int:
    """How far pressure must drop between two peaks of ``height`` for them to be distinct:
    10 % of it, at least 2 registers."""
    return max(2, height // 10)
