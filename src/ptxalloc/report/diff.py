"""``ptxalloc diff``: two builds of a module compared per function (SPEC section 9's report;
issue 14, "Compare two builds"), as a CI gate would compare ``ptxas -v`` dumps.

Each side is an ``allocate`` report (``ptxalloc/allocate/1``: written by ``allocate --json`` or
made by allocating a PTX file with the same options). Functions are matched by name; for each,
four figures:

==============  ======================================================================
registers       registers used ("Used N registers")
max-live        MaxLive of the function as written (``max_live.registers``)
spill-bytes     spill store bytes + spill load bytes (ptxas's two ``-v`` figures)
occupancy       occupancy at those registers, in percent of the SM's warps (0 when the
                function cannot launch), for the launch bound's block size, else 256
==============  ======================================================================

The totals are Mesa's shader-db style, over the *affected* functions (those in both files where
some figure changed): ``Totals from N affected functions: spill bytes 448 -> 447 (-0.22 %)``;
registers, MaxLive and spill bytes are summed, occupancy is the mean.

Thresholds (``--fail-on``), a comma-separated list of ``METRIC=SIGNNUMBER[%]``:

* METRIC is one of the four names above; SIGN, ``+`` or ``-``, is required and says which way
  is worse; NUMBER is a non-negative amount in the metric's unit (percentage points for
  occupancy), or with ``%``, a percentage of the old figure.
* ``+N`` trips when some function's figure rises by more than N (``registers=+0``: any rise);
  ``-N`` trips when it falls by more than N (``occupancy=-1``: a drop of more than one point).
* With ``%``, the change relative to the old figure is compared; from an old figure of 0 any
  change in the threshold's direction trips.
* Functions only in one file are listed (``added``/``removed``) and never trip a threshold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError
from .schema import schema_name

METRICS = ("registers", "max_live", "spill_bytes", "occupancy")
OPTION_NAMES = {"registers": "registers", "max-live": "max_live", "spill-bytes": "spill_bytes",
                "occupancy": "occupancy"}
LABELS = {"registers": "registers", "max_live": "MaxLive", "spill_bytes": "spill bytes",
          "occupancy": "occupancy (mean %)"}
_THRESHOLD = re.compile(r"([a-z-]+)=([+-])(\d+(?:\.\d+)?)(%?)")


@dataclass(frozen=True)
class Threshold:
    metric: str          # one of METRICS
    sign: int            # +1: a rise is worse; -1: a fall is worse
    limit: float
    relative: bool       # limit is a percentage of the old figure
    text: str

    def trips(self, old: float, new: float) -> bool:
        change = (new - old) * self.sign
        if change <= 0:
            return False
        if self.relative:
            return old == 0 or 100 * change / abs(old) > self.limit
        return change > self.limit


def parse_thresholds(text: str | None) -> list[Threshold]:
    """``--fail-on``: the grammar of the module docstring; a bad item is a usage error."""
    if not text:
        return []
    out = []
    for item in text.split(","):
        item = item.strip()
        m = _THRESHOLD.fullmatch(item)
        if not m or m.group(1) not in OPTION_NAMES:
            raise UsageError(f"--fail-on: '{item}' is not METRIC=+N, METRIC=-N or METRIC=+N% "
                             f"(METRIC: {', '.join(OPTION_NAMES)})")
        out.append(Threshold(OPTION_NAMES[m.group(1)], 1 if m.group(2) == "+" else -1,
                             float(m.group(3)), bool(m.group(4)), item))
    return out


def figures(report: dict, where: str) -> dict[str, dict[str, float]]:
    """``{function: {metric: figure}}`` of an ``allocate`` report; ``where`` names it in
    errors."""
    if report.get("schema") != schema_name("allocate"):
        raise UsageError(f"{where}: not a ptxalloc allocate report (schema "
                         f"'{report.get('schema')}', expected '{schema_name('allocate')}')")
    out = {}
    try:
        for row in report["functions"]:
            occ = row["occupancy"]["occupancy"]
            out[row["name"]] = {
                "registers": row["registers"],
                "max_live": row["max_live"]["registers"],
                "spill_bytes": row["spill_stores_bytes"] + row["spill_loads_bytes"],
                "occupancy": round(100 * (occ or 0.0), 2),
            }
    except (KeyError, TypeError) as e:
        raise UsageError(f"{where}: a function of the report lacks {e}") from None
    return out


def compare(old: dict, new: dict, old_where: str = "OLD", new_where: str = "NEW") -> dict:
    """The ``diff --json`` body (without the header): per function old, new and change,
    ``added``/``removed`` functions and the totals over the affected ones."""
    a, b = figures(old, old_where), figures(new, new_where)
    rows = []
    for name in [n for n in b if n in a]:
        change = {m: _round(b[name][m] - a[name][m]) for m in METRICS}
        rows.append({"name": name, "old": a[name], "new": b[name], "change": change,
                     "affected": any(change.values())})
    affected = [r for r in rows if r["affected"]]
    totals = {}
    for m in METRICS:
        o = sum(r["old"][m] for r in affected)
        n = sum(r["new"][m] for r in affected)
        if m == "occupancy" and affected:
            o, n = o / len(affected), n / len(affected)
        totals[m] = {"old": _round(o), "new": _round(n), "change": _round(n - o),
                     "percent": 0 if n == o else _round(100 * (n - o) / o) if o else None}
    return {"functions": rows, "added": [n for n in b if n not in a],
            "removed": [n for n in a if n not in b],
            "totals": {"affected": len(affected), "compared": len(rows), **totals}}


def tripped(diff: dict, thresholds: list[Threshold]) -> list[str]:
    """One message per (function, threshold) that trips."""
    out = []
    for t in thresholds:
        for r in diff["functions"]:
            o, n = r["old"][t.metric], r["new"][t.metric]
            if t.trips(o, n):
                out.append(f"{r['name']}: {LABELS[t.metric]} {_fmt(o)} -> {_fmt(n)} trips "
                           f"{t.text}")
    return out


def format_text(diff: dict, old_name: str, new_name: str) -> str:
    """Changed functions, one line each, then Mesa's totals."""
    lines = [f"{old_name} -> {new_name}: {diff['totals']['compared']} function(s) compared"]
    for r in diff["functions"]:
        if not r["affected"]:
            continue
        parts = [f"{LABELS[m].split(' (')[0]} {_fmt(r['old'][m])} -> {_fmt(r['new'][m])}"
                 for m in METRICS if r["change"][m]]
        lines.append(f"  {r['name']}: " + ", ".join(parts))
    for key, what in (("added", "only in NEW"), ("removed", "only in OLD")):
        if diff[key]:
            lines.append(f"  {what}: {', '.join(diff[key])}")
    t = diff["totals"]
    if not t["affected"]:
        lines.append("No affected functions.")
    n = t["affected"]
    for m in METRICS if n else ():
        row = t[m]
        pct = "n/a" if row["percent"] is None else f"{row['percent']:+.2f} %"
        lines.append(f"Totals from {n} affected function{'s' if n != 1 else ''}: "
                     f"{LABELS[m]} {_fmt(row['old'])} -> {_fmt(row['new'])} ({pct})")
    return "\n".join(lines)


def _round(x: float) -> float:
    x = round(x, 2)
    return int(x) if x == int(x) else x


def _fmt(x: float) -> str:
    return f"{x:g}"
