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
from collections import Counter
from itertools import islice
from operator import lt

from ..records import field, record
from .sources import source_of


@record
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
    """The per-line view: PTX lines in order with their registers (``ptx_lines``,
    ``registers``) and the distinct peaks (``peaks``), which ``analyze`` prints for every
    function; the predicates, sources, histogram and source lines (:attr:`predicates`,
    :attr:`lines`, :attr:`histogram`, :attr:`source_lines`, :meth:`as_dict`), which only
    ``--lines``, a plot or the HTML report read, are computed on first use (issue 16)."""

    def __init__(self, cfg, pressure, files: dict[int, str], whole: list[int],
                 ptx_lines: list[int], registers: list[int], members, max_peaks: int):
        self._cfg = cfg
        self._pressure = pressure
        self._files = files
        self._whole = whole              # per instruction: its whole registers
        self.ptx_lines = ptx_lines
        self.registers = registers
        self._members = members          # per line: its instruction id, or a list of them
        self._details: tuple | None = None
        self._lines: list[LineFigure] | None = None
        instrs = cfg.instrs
        self.peaks = distinct_peaks(
            ptx_lines, registers,
            lambda k: source_of(instrs[_first(members[k])].loc, files), max_peaks)

    @property
    def predicates(self) -> list[int]:
        return self.details()[0]

    @property
    def sources(self) -> list:
        """Per line, the source of its first instruction (None without ``.loc``)."""
        return self.details()[1]

    @property
    def histogram(self) -> dict[int, int]:
        return self.details()[2]

    @property
    def source_lines(self) -> list[dict]:
        return self.details()[3]

    def details(self) -> tuple:
        """(predicates per line, sources per line, histogram, source lines), computed once."""
        if self._details is None:
            self._details = _details(self._cfg, self._pressure, self._files, self._whole,
                                     self.ptx_lines, self._members)
        return self._details

    @property
    def lines(self) -> list[LineFigure]:
        """One :class:`LineFigure` per PTX line, in order (built on first use)."""
        if self._lines is None:
            self._lines = [LineFigure(ln, src, r, p, ids if type(ids) is list else [ids])
                           for ln, src, r, p, ids in zip(self.ptx_lines, self.sources,
                                                         self.registers, self.predicates,
                                                         self._members)]
        return self._lines

    def as_dict(self) -> dict:
        return {"lines": [x.as_dict() for x in self.lines],
                "source_lines": self.source_lines,
                "histogram": {str(k): v for k, v in sorted(self.histogram.items())},
                "peaks": self.peaks}


def _first(ids) -> int:
    return ids[0] if type(ids) is list else ids


def line_pressure(cfg, pressure, files: dict[int, str], max_peaks: int = 5) -> LinePressure:
    """The per-line view of one function's pressure; ``files`` is the module's ``.file``
    table (:func:`~ptxalloc.analysis.sources.source_files`). One instruction a line in
    increasing order (as parsed PTX has it) needs no grouping."""
    instrs = cfg.instrs
    ceil = math.ceil
    # per instruction its registers in whole 32-bit registers, a block's first instruction
    # with the block's live-in figure (ceil is monotone: the ceiling of the larger)
    whole = list(map(ceil, pressure.gpr))
    entry_gpr = pressure.entry_gpr
    for b in cfg.blocks:
        if b.instrs:
            e = ceil(entry_gpr[b.id])
            if e > whole[b.first]:
                whole[b.first] = e
    lines = [ins.line for ins in instrs]
    if all(map(lt, lines, islice(lines, 1, None))):
        return LinePressure(cfg, pressure, files, whole, lines, whole, range(len(lines)),
                            max_peaks)
    # per PTX line (in the order first met): its slot in parallel lists
    slot: dict[int, int] = {}
    ptx_lines: list[int] = []
    registers: list[int] = []
    members: list = []
    for i, (line, w) in enumerate(zip(lines, whole)):
        k = slot.get(line)
        if k is None:
            slot[line] = len(ptx_lines)
            ptx_lines.append(line)
            registers.append(w)
            members.append(i)
        else:
            if w > registers[k]:
                registers[k] = w
            ids = members[k]
            if type(ids) is list:
                ids.append(i)
            else:
                members[k] = [ids, i]
    order = sorted(range(len(ptx_lines)), key=ptx_lines.__getitem__)
    if order != list(range(len(order))):
        ptx_lines, registers, members = ([col[k] for k in order]
                                         for col in (ptx_lines, registers, members))
    return LinePressure(cfg, pressure, files, whole, ptx_lines, registers, members, max_peaks)


def _details(cfg, pressure, files, whole: list[int], ptx_lines: list[int], members) -> tuple:
    """:meth:`LinePressure.details` of a function's per-line view."""
    instrs = cfg.instrs
    preds = list(pressure.pred)
    entry_pred = pressure.entry_pred
    for b in cfg.blocks:
        if b.instrs:
            preds[b.first] = max(preds[b.first], entry_pred[b.id])
    predicates = []
    sources = []
    for ids in members:
        if type(ids) is list:
            predicates.append(max(preds[i] for i in ids))
            first = ids[0]
        else:
            predicates.append(preds[ids])
            first = ids
        loc = instrs[first].loc
        sources.append(None if loc is None else source_of(loc, files))
    histogram = dict(Counter(whole))
    per_source: dict[tuple, list] = {}
    for i, ins in enumerate(instrs):
        loc = ins.loc
        if loc is None:
            continue
        src = source_of(loc, files)
        w = whole[i]
        p = preds[i]
        places = [(src["file"], src["line"])]
        places += [(at["file"], at["line"]) for at in src.get("inlined_at", ())]
        for key in places:
            row = per_source.get(key)
            if row is None:
                per_source[key] = [w, p, 1, ins.line]
            else:
                if w > row[0]:
                    row[0] = w
                    row[3] = ins.line
                row[1] = max(row[1], p)
                row[2] += 1
    source_lines = [{"file": f, "line": ln, "max_registers": r[0], "max_predicates": r[1],
                     "instructions": r[2], "ptx_line_of_max": r[3]}
                    for (f, ln), r in sorted(per_source.items())]
    return predicates, sources, histogram, source_lines


def distinct_peaks(ptx_lines: list[int], registers: list[int], source_at,
                   count: int) -> list[dict]:
    """The ``count`` highest distinct peaks of the line sequence (per line in order: its PTX
    line and registers; ``source_at(k)`` the source of line ``k``, asked of the peaks kept
    only), highest first, then earliest: ``{"registers", "first_ptx_line", "last_ptx_line",
    "source"}``.

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
    merged.sort(key=lambda pk: (-pk[0], ptx_lines[pk[1]]))
    return [{"registers": h, "first_ptx_line": ptx_lines[a], "last_ptx_line": ptx_lines[b],
             "source": source_at(top)} for h, a, b, top in merged[:count]]


def dip(height: int) -> int:
    """How far pressure must drop between two peaks of ``height`` for them to be distinct:
    10 % of it, at least 2 registers."""
    return max(2, height // 10)
