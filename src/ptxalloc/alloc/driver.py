"""Allocation rounds for one function (seed 002 "Iteration Counts"; SPEC 4.6, sections 5 and 8).

    legalize tuples -> [ analyse -> build the problem -> coalesce -> color
                         -> spill and rewrite while actual spills remain ] -> assign
    -> drop redundant spill code -> assign spill slots -> write physical PTX

Each round analyses the function as the previous round left it. A node the allocator could not
place is spilled: its registers get stores and reloads (or are rematerialized) and the next
round colors the short temporaries that replace them. Temporaries are never spilled again; if
one cannot be placed, the cheapest spillable neighbours that block one of its placements are
spilled instead. A budget that one instruction alone exceeds is refused up front with an error
naming the instruction.

The allocator itself is pluggable: ``briggs`` (:mod:`briggs`, seeds 000-002) here, ``fatpoint``
(seed 004) in its own module; both see the program only through :class:`Problem`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from ..analysis import analyze_function
from ..errors import AllocationError
from ..ir.cfg import CFG
from ..ir.instruction import Instruction, Removed
from ..ir.module import Function
from ..ir.operands import Mem
from ..ir.registers import RegClass
from ..target.sm import SMProfile
from ..target.units import GPR, PRED, RegFile, vreg_shape
from ..util import gc_paused
from . import output
from .briggs import Coloring, color
from .coalesce import COALESCE_FACTOR, coalesce
from .compact import compact
from .legalize import legalize_tuples
from .problem import Problem
from ..spill.lazy import remove_redundant_spill_code
from ..spill.remat import COMPUTE_COST, remat_candidates
from ..spill.rewrite import SpillState, rewrite_spills
from ..spill.slots import assign_slots
from ..analysis.tuples import find_tuples

MAX_ROUNDS = 40
SPILL_ARRAY = "__ptxalloc_spill"


@dataclass
class Options:
    allocator: str = "briggs"
    coalesce_factor: float = COALESCE_FACTOR
    compact: bool = True
    knobs: dict[str, float] = field(default_factory=dict)


@dataclass
class FunctionResult:
    """What allocating one function produced; ``report()`` is the JSON row of the issue."""

    name: str
    allocator: str
    budget: int
    registers: int = 0
    predicates: int = 0
    max_live: int = 0
    spill_stores_bytes: int = 0
    spill_loads_bytes: int = 0
    stack_frame_bytes: int = 0
    spilled_values: int = 0
    rematerialized: int = 0
    moves: int = 0
    moves_coalesced: int = 0
    rounds: int = 0
    verified: bool | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    text: str = ""
    function: Function | None = None          # the allocated function (physical registers)
    names: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)

    def report(self) -> dict:
        row = {k: getattr(self, k) for k in (
            "name", "allocator", "budget", "registers", "predicates", "max_live",
            "spill_stores_bytes", "spill_loads_bytes", "stack_frame_bytes", "spilled_values",
            "rematerialized", "moves", "moves_coalesced", "rounds", "verified")}
        row["seconds"] = {k: round(v, 6) for k, v in self.seconds.items()}
        row.update(self.extra)
        return row


Allocator = Callable[[Problem, Options], Coloring]


def _briggs(problem: Problem, options: Options) -> Coloring:
    return color(problem, options.coalesce_factor)


ALLOCATORS: dict[str, Allocator] = {"briggs": _briggs}


def _pack(shapes: list, regfile: RegFile) -> bool:
    """Whether shapes fit side by side in the register file (first fit, largest first)."""
    used = 0
    for shape in sorted(shapes, key=lambda s: (-s.units, -s.align)):
        for _, mask in regfile.placements(shape):
            if not mask & used:
                used |= mask
                break
        else:
            return False
    return True


def check_feasible(fn: Function, regfile: RegFile, pinned: set[int]) -> None:
    """Refuse a budget that one instruction's operands alone exceed (SPEC section 2)."""
    regs = fn.regs
    info = find_tuples(fn)
    group_shape = {}
    for g in info.groups:
        for v, _ in g.members:
            group_shape[v] = (id(g), g.shape)
    for ins in fn.instructions():
        for values in (ins.uses, ins.defs):
            shapes = []
            seen = set()
            for v in values:
                if v in pinned or regs.classes[v] == RegClass.PRED:
                    continue
                if v in group_shape:
                    key, shape = group_shape[v]
                    if key in seen:
                        continue
                    seen.add(key)
                else:
                    shape = vreg_shape(regs.classes[v], regs.vec[v])
                shapes.append(shape)
            if shapes and not _pack(shapes, regfile):
                need = sum(s.units for s in shapes) / 2
                raise AllocationError(
                    f"{fn.filename}:{ins.line}: function '{fn.name}': "
                    f"'{ins.render(regs.names.__getitem__)}' needs {need:g} registers at once "
                    f"({len(shapes)} operand(s)), more than the budget of {regfile.k} allows")


def _relieve(problem: Problem, coloring: Coloring, node: int) -> set[int]:
    """Registers to spill so that the unspillable ``node`` finds a placement: the cheapest set
    of spillable colored neighbours that block one placement."""
    start = coloring.start
    best = None
    for s, mask in problem.regfile.placements(problem.shape[node]):
        cost = 0.0
        blockers = []
        ok = True
        from ..util import bits
        for m in bits(problem.adj[node]):
            sm = start.get(m)
            if sm is None:
                continue
            mm = ((1 << problem.shape[m].units) - 1) << sm
            if mm & mask:
                if math.isinf(problem.cost[m]) or m in problem.fixed:
                    ok = False
                    break
                cost += problem.cost[m]
                blockers.append(m)
        if ok and (best is None or cost < best[0]):
            best = (cost, blockers)
    if best is None:
        return set()
    out: set[int] = set()
    for m in best[1]:
        out.update(problem.members[m])
    return out


def allocate_function(fn: Function, sm: SMProfile, budget: int,
                      options: Options | None = None) -> FunctionResult:
    options = options or Options()
    if options.allocator not in ALLOCATORS:
        raise AllocationError(f"unknown allocator '{options.allocator}' "
                              f"(known: {', '.join(sorted(ALLOCATORS))})")
    allocator = ALLOCATORS[options.allocator]
    seconds: dict[str, float] = {}

    def tick(phase: str, t0: float) -> float:
        t = time.perf_counter()
        seconds[phase] = seconds.get(phase, 0.0) + t - t0
        return t

    with gc_paused():
        t = time.perf_counter()
        result = FunctionResult(fn.name, options.allocator, budget)
        regfile = RegFile(budget)
        pinned = {p.vid for p in fn.params + fn.returns if p.space == "reg" and p.vid >= 0}
        origin_of = {v: v for v in range(len(fn.regs))}
        work = fn.copy()
        result.moves = sum(1 for ins in fn.instructions() if ins.is_copy)
        legalize_tuples(work, origin_of)
        check_feasible(work, regfile, pinned)
        state = SpillState(SPILL_ARRAY, origin_of)
        t = tick("legalize", t)
        first_max_live = None
        while True:
            result.rounds += 1
            if result.rounds > MAX_ROUNDS:
                raise AllocationError(f"function '{fn.name}': allocation did not converge in "
                                      f"{MAX_ROUNDS} rounds at budget {budget}")
            instrs = work.instructions()
            remat = remat_candidates(work, instrs)
            remat = {v: d for v, d in remat.items() if v not in pinned}
            analysis = analyze_function(work, sm, {v: COMPUTE_COST for v in remat},
                                        state.no_spill | pinned)
            if first_max_live is None:
                first_max_live = analysis.pressure.max_live
            problem = Problem(analysis, regfile, pinned=pinned)
            t = tick("analysis", t)
            cstats = coalesce(problem, options.coalesce_factor)
            t = tick("coalesce", t)
            coloring = allocator(problem, options)
            t = tick("color", t)
            if not coloring.spilled:
                if options.compact:
                    compact(problem, coloring, analysis.pressure.max_live)
                break
            to_spill: set[int] = set()
            for node in coloring.spilled:
                if math.isinf(problem.cost[node]):
                    relief = _relieve(problem, coloring, node)
                    if not relief:
                        raise AllocationError(_stuck_message(work, problem, node, budget))
                    to_spill |= relief
                else:
                    to_spill.update(problem.members[node])
            work = rewrite_spills(work, to_spill, remat, state)
            t = tick("spill", t)
        result.max_live = first_max_live or 0
        del cstats
        _finish(fn, work, problem, coloring, state, result, sm, budget, options, pinned)
        tick("output", t)
    result.seconds = seconds
    return result


def _stuck_message(fn: Function, problem: Problem, node: int, budget: int) -> str:
    v = problem.members[node][0]
    for ins in fn.instructions():
        if v in ins.defs or v in ins.uses:
            return (f"{fn.filename}:{ins.line}: function '{fn.name}': cannot allocate "
                    f"'{ins.render(fn.regs.names.__getitem__)}' within {budget} registers: its "
                    f"operands and the values that must stay live across it do not fit")
    return f"function '{fn.name}': cannot allocate within {budget} registers"


def _finish(original: Function, work: Function, problem: Problem, coloring: Coloring,
            state: SpillState, result: FunctionResult, sm: SMProfile, budget: int,
            options: Options, pinned: set[int]) -> None:
    regs = work.regs
    start: dict[int, int] = {}
    for node, members in problem.members.items():
        s = coloring.start[node]
        for v in members:
            start[v] = s + problem.offset[v]
    mask_of: dict[int, int] = {}
    for v, s in start.items():
        shape = vreg_shape(regs.classes[v], regs.vec[v])
        m = ((1 << shape.units) - 1) << s
        mask_of[v] = m if shape.file == GPR else m << 1024     # predicates: a file apart
    cfg = CFG(work)
    redundant = remove_redundant_spill_code(cfg, mask_of)
    if redundant:
        work.body = [s for s in work.body if id(s) not in redundant]
        cfg = CFG(work)
    frame = assign_slots(cfg, state.slot_size, SPILL_ARRAY)
    stem = output.choose_stem(original)
    names = list(regs.names)
    for v, s in start.items():
        names[v] = output.physical_name(regs, v, s, stem)
    removed_copies = set()
    for ins in cfg.instrs:
        if ins.is_copy and ins.origin is None and names[ins.defs[0]] == names[ins.uses[0]]:
            removed_copies.add(id(ins))
    used_names = set()
    for ins in cfg.instrs:
        if id(ins) in removed_copies:
            continue
        for v in ins.defs + ins.uses:
            if v not in pinned and v in start:
                used_names.add(names[v])
        output.annotate(ins, regs, original.regs)
    # the high-water marks cover whole placements (a tuple's sink members included)
    gprs = [-1]
    preds = [-1]
    for node, s in coloring.start.items():
        shape = problem.shape[node]
        if shape.file == PRED:
            preds.append(s)
        else:
            gprs.append((s + shape.units - 1) // 2)
    stores = loads = 0
    for ins in cfg.instrs:
        o = ins.origin
        if o and o[0] == "spill":
            stores += _width(regs, ins.uses[0])
        elif o and o[0] == "reload":
            loads += _width(regs, ins.defs[0])
    header = (f"//@ptxalloc allocator={options.allocator} budget={budget} arch={sm.name} "
              f"stem={stem}" + (f" spill={SPILL_ARRAY} frame={frame}" if frame else ""))
    array_decl = f".local .align 16 .b8 {SPILL_ARRAY}[{frame}];" if frame else None
    out = work.copy()
    out.body = output.build_body(work, names, header, output.declarations(used_names, stem),
                                 array_decl, removed_copies)
    result.function = out
    result.names = names
    result.registers = max(gprs) + 1
    result.predicates = max(preds) + 1
    result.spill_stores_bytes = stores
    result.spill_loads_bytes = loads
    result.stack_frame_bytes = frame
    result.spilled_values = len(state.spilled_values)
    result.rematerialized = len(state.rematerialized)
    result.moves_coalesced = len(removed_copies)
    result.extra["registers_optimal"] = coloring.optimal


def _width(regs, v: int) -> int:
    from ..ir.build import width_bytes
    return width_bytes(regs, v)


__all__ = ["allocate_function", "FunctionResult", "Options", "ALLOCATORS", "Removed", "Mem",
           "Instruction"]
