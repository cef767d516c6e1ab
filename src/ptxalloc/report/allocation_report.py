"""The ``allocate -v`` lines: per function, figures in ptxas's manner, then moves, rounds and
time (SPEC section 9)."""

from __future__ import annotations

from ..alloc.driver import FunctionResult
from ..target.sm import SMProfile


def verbose_lines(r: FunctionResult, sm: SMProfile | None, kind: str = "func",
                  spills: list[str] = ()) -> list[str]:
    """ptxas's ``-v`` lines for the function, word for word where ptxas has the figure
    (ptxas also prints barriers and constant banks on its "Used" line; ptxalloc does not know
    them), then ptxalloc's own on lines of their own: allocator, budget, predicates, MaxLive,
    moves, rounds, proof, time, notes and ``spills`` (the spilled values explained)."""
    arch = sm.name if sm else "?"
    verified = {True: "verified", False: "NOT verified", None: "not checked"}[r.verified]
    source = r.extra.get("budget_from")
    lines = [f"ptxas info    : Compiling entry function '{r.name}' for '{arch}'"] \
        if kind == "entry" else []
    lines += [
        f"ptxas info    : Function properties for {r.name}",
        f"    {r.stack_frame_bytes} bytes stack frame, {r.spill_stores_bytes} bytes spill "
        f"stores, {r.spill_loads_bytes} bytes spill loads",
        f"ptxas info    : Used {r.registers} registers" + (
            f", {r.uniform_registers} uniform registers" if "uniform_values" in r.extra
            else ""),
        f"ptxalloc info : {r.name}: {r.allocator}, budget {r.budget}"
        f"{f' from {source}' if source else ''}, {arch}; {r.predicates} predicates "
        f"(MaxLive {_max_live(r)})",
        f"    {r.moves_coalesced} of {r.moves} moves coalesced, {r.spilled_values} values "
        f"spilled ({r.rematerialized} rematerialized), {r.rounds} round(s), {verified}, "
        f"{1000 * sum(r.seconds.values()):.1f} ms",
    ]
    uniform = r.extra.get("uniform_values")
    if uniform:
        lines.append(f"    uniform: {uniform['placed']} of {uniform['found']} uniform values in "
                     f"UR/UP ({r.uniform_registers} UR, {r.uniform_predicates} UP); MaxLive of "
                     f"R without them {uniform['max_live_registers']}")
    lines.extend(f"    {note}" for note in r.notes)
    lines.extend(spills)
    return lines


def _max_live(r: FunctionResult) -> str:
    """MaxLive as written (what ``analyze`` reports), and the legalized one where the
    allocator's rewriting (tuple legalization, binding copies, asynchronous registers) raised
    it, or ``as allocated`` where the passes before allocation (recomputation at the use)
    lowered it."""
    if r.max_live_legalized and r.max_live_legalized > r.max_live:
        return f"{r.max_live}, {r.max_live_legalized} legalized"
    if r.max_live_legalized and r.max_live_legalized < r.max_live:
        return f"{r.max_live}, {r.max_live_legalized} as allocated"
    return str(r.max_live)


def cuobjdump_lines(results: list[FunctionResult]) -> list[str]:
    """The allocation as ``cuobjdump -res-usage`` prints a cubin's resource usage::

        Resource usage:
         Function NAME:
          REG:N STACK:S SHARED:? LOCAL:0

    REG is the registers used, STACK the stack frame (spill slots and saved registers, as
    ptxas's "bytes stack frame"), LOCAL 0 (ptxalloc keeps spills in the stack frame). SHARED
    is ``?``: ptxalloc does not compute shared memory; nor constant banks, textures, surfaces
    or samplers, which cuobjdump also prints and are left out."""
    lines = ["Resource usage:"]
    for r in results:
        lines += [f" Function {r.name}:",
                  f"  REG:{r.registers} STACK:{r.stack_frame_bytes} SHARED:? LOCAL:0"]
    return lines
