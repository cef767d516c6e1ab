"""Every allocator graded against the optimum (issue 18; the cost model of seed 000 "Spill Cost",
the exact allocator of :mod:`ptxalloc.alloc.optimal`).

For each function, each registered allocator runs through the ordinary pipeline (driver rounds,
spill rewrite, output, checker). What is compared is the *first round*: every allocator starts
from the same :class:`~ptxalloc.alloc.api.Problem` (the function as written, legalized and bound
to the convention), and the cost model's weighted total of the registers it leaves to spill
there is its *spill cost*. Coalescing merges nodes but never makes spilling cheaper (a merged
node spills all its members at the sum of their costs), so the optimum of the uncoalesced
problem bounds every allocator's spill cost from below; the gap is
``(cost - optimum) / optimum`` in percent (against the proven lower bound when the time limit
stopped the solver: then the true gap is at most that). The final spill bytes (stores and
loads over all rounds) and the registers used are reported beside it.

With ``shortcut`` (the corpus bench's setting), the heuristics run first and, when one of them
leaves nothing to spill in the first round (cost 0, so the optimum is 0: costs are never
negative), the solver is not run: the optimum's row says ``"reached_by"`` that heuristic, whose
allocation the checker proved. It changes no number of the grade; in the corpus grade of
docs/decisions.md it left out the optimal allocator's run for 5,055 of 5,664 function-budget
pairs.

Each function is graded in a copy of the module where it is the only definition: the other
``.func`` definitions become declarations (their header and ``;``) and the ``.entry`` ones are
left out. Allocation and checker work on one function at a time and read only the module-level
declarations, so the figures are the same; what changes is that the allocated text emitted,
re-parsed and checked per run is that one function, not the whole file (a corpus file of 188
functions was parsed whole 12 times per function graded).

The first round's spill cost is the driver's ``FunctionResult.first_round_spill_cost``: that of
the coloring the round kept, after briggs's second chances (:mod:`ptxalloc.alloc.choice`).
"""

from __future__ import annotations

import math

from .alloc import api
from .alloc.driver import Options
from .alloc.optimal import gap_percent
from .errors import AllocationError
from .ir.instruction import DIRECTIVE, Raw
from .ir.module import Function, Module
from .pipeline import allocate_module


def alone(module: Module, fn: Function) -> Module:
    """``module`` with ``fn`` its only definition: every other ``.func`` declared by its header,
    every other ``.entry`` left out (module docstring)."""
    items = []
    for it in module.items:
        if type(it) is not Function or it is fn:
            items.append(it)
        elif not it.is_entry:
            items.append(Raw(DIRECTIVE, it.header + "\n;", it.line))
    return Module(items, module.filename, module.version, list(module.target),
                  module.address_size)


def _run(module, fn_name: str, allocator: str, registers, arch, time_limit: float,
         limits: dict, knobs: dict[str, float] | None = None) -> dict:
    """One allocator on one function: its row, or the reason it was refused."""
    options = Options(allocator=allocator, time_limit=time_limit, knobs=dict(knobs or {}))
    try:
        res = allocate_module(module, registers, allocator, arch, fn_name, verify=True,
                              options=options, **limits)
    except AllocationError as e:
        return {"refused": str(e)}
    fr = res.functions[0]
    cost = fr.first_round_spill_cost
    row = {"spill_cost": None if cost is None or math.isinf(cost) else cost,   # None: inf
           "spill_bytes": fr.spill_stores_bytes + fr.spill_loads_bytes,
           "registers": fr.registers, "rounds": fr.rounds, "verified": fr.verified,
           "seconds": round(sum(fr.seconds.values()), 4)}
    for key in ("optimal", "lower_bound", "solver_seconds"):   # the optimal allocator's
        if key in fr.extra:
            row[key] = fr.extra[key]
    return row


def grade_module(module, registers=None, arch: str | None = None, function: str | None = None,
                 time_limit: float = 10.0, allocators: list[str] | None = None,
                 maxrregcount: int | None = None,
                 override_directive_values: bool = False, shortcut: bool = False) -> list[dict]:
    """Per function: the optimum (or its bound) and every other allocator's figures and gap
    (``registers``, ``arch`` and the last two as for :func:`~ptxalloc.pipeline.allocate_module`;
    ``shortcut``: no solver where a heuristic's first round spills nothing, module docstring)."""
    limits = {"maxrregcount": maxrregcount,
              "override_directive_values": override_directive_values}
    heuristics = [a for a in (allocators or api.names()) if a != "optimal"]
    rows = []
    for fn in module.functions:
        if function is not None and fn.name != function:
            continue
        one = alone(module, fn)
        if shortcut:
            got = {name: _run(one, fn.name, name, registers, arch, time_limit, limits)
                   for name in heuristics}
            free = [name for name, g in got.items() if g.get("spill_cost") == 0]
            best = ({"spill_cost": 0.0, "optimal": True, "lower_bound": 0.0,
                     "solver_seconds": 0.0, "reached_by": free[0]} if free else
                    _run(one, fn.name, "optimal", registers, arch, time_limit, limits))
        else:
            best = _run(one, fn.name, "optimal", registers, arch, time_limit, limits)
            got = {name: _run(one, fn.name, name, registers, arch, time_limit, limits)
                   for name in heuristics}
        for g in got.values():
            if "refused" not in g and "refused" not in best:
                cost = math.inf if g["spill_cost"] is None else g["spill_cost"]
                g["gap"] = gap_percent(cost, best["lower_bound"])
                g["gap_exact"] = bool(best["optimal"])
        rows.append({"name": fn.name, "optimal": best, "allocators": got})
    return rows


def _pct(g) -> str:
    return "inf" if g is None else f"{g:.1f}%"


def format_text(rows: list[dict], filename: str) -> str:
    """The grade as a table: one line per function and allocator."""
    out = [f"{filename}: spill cost of the first round against the optimum "
           "(gap in percent of it; '<=' where only a bound was proven)"]
    for row in rows:
        best = row["optimal"]
        if "refused" in best:
            out.append(f"{row['name']}: refused: {best['refused']}")
            continue
        what = ("optimum" if best["optimal"] else
                f"best found (time limit), lower bound {best['lower_bound']:g}")
        if "reached_by" in best:
            out.append(f"{row['name']}: optimum 0 (reached by {best['reached_by']}: "
                       "no solver needed)")
        else:
            out.append(f"{row['name']}: {what} {best['spill_cost']:g}, "
                       f"{best['spill_bytes']} spill bytes, {best['registers']} registers, "
                       f"solver {best.get('solver_seconds', 0):.2f} s")
        for name, got in row["allocators"].items():
            if "refused" in got:
                out.append(f"  {name:<9} refused: {got['refused']}")
                continue
            bound = "" if got["gap_exact"] else "<="
            cost = "inf" if got["spill_cost"] is None else f"{got['spill_cost']:g}"
            out.append(f"  {name:<9} spill cost {cost} "
                       f"(gap {bound}{_pct(got['gap'])}), {got['spill_bytes']} spill bytes, "
                       f"{got['registers']} registers")
    return "\n".join(out)
