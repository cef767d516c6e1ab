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
            else "") + _smem(r),
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


def _smem(r: FunctionResult) -> str:
    """ptxas's ``, N bytes smem`` for the shared spill area (``--spill-to shared``) with the
    function's own static ``.shared`` (a lower bound: no padding between variables), and the
    occupancy the area costs."""
    area = r.extra.get("shared_spill")
    if not area:
        return ""
    occ, without = r.extra.get("occupancy"), area.get("occupancy_without")
    cost = ""
    if occ and without and occ["occupancy"] is not None and without["occupancy"] is not None:
        cost = (f" (spill area: {area['frame_bytes']} bytes x {area['block_size']} threads; "
                f"occupancy {100 * occ['occupancy']:.1f} % against "
                f"{100 * without['occupancy']:.1f} % without it)")
    return f", {area['bytes'] + area.get('own_bytes', 0)} bytes smem{cost}"


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


def regalloc_stats(r: FunctionResult) -> dict:
    """Seed 001's allocation statistics (``--print-regalloc-stats``; the report's
    ``regalloc_stats``): the first round's interference graph (nodes, edges, density, degrees,
    copies), moves coalesced, the spill rate (values spilled per node of that graph), rounds
    and the time per phase."""
    graph = r.extra.get("graph") or {}
    nodes = graph.get("nodes", 0)
    return {**graph, "moves_coalesced": r.moves_coalesced, "spilled_values": r.spilled_values,
            "spill_rate": round(r.spilled_values / nodes, 6) if nodes else 0.0,
            "rounds": r.rounds,
            "seconds": {k: round(v, 6) for k, v in r.seconds.items()}}


def regalloc_stats_lines(r: FunctionResult) -> list[str]:
    """The ``--print-regalloc-stats`` lines of one function."""
    s = r.extra["regalloc_stats"]
    phases = ", ".join(f"{k} {1000 * v:.2f} ms" for k, v in s["seconds"].items())
    return [f"ptxalloc stats: {r.name}: interference {s['nodes']} nodes, {s['edges']} edges, "
            f"density {s['density']:.4f}, max degree {s['max_degree']}, average degree "
            f"{s['avg_degree']:.1f}",
            f"    moves coalesced {r.moves_coalesced} of {r.moves}, spill rate "
            f"{s['spilled_values']}/{s['nodes']} ({100 * s['spill_rate']:.2f} %), "
            f"{s['rounds']} round(s)",
            f"    time per phase: {phases}"]
