"""Allocation rounds for one function (seed 002 "Iteration Counts"; SPEC 4.6, sections 5, 7
and 8).

    legalize tuples -> bind the calling convention
    -> [ analyse -> build the problem -> coalesce -> color
         -> spill and rewrite while actual spills remain ] -> compact the colors
    -> caller saves around calls, callee-saved prologue/epilogues
    -> drop redundant spill code -> assign spill slots -> write physical PTX

Each round analyses the function as the previous round left it. A node the allocator could not
place is spilled: its registers get stores and reloads (or are rematerialized) and the next
round colors the short temporaries that replace them. Temporaries are never spilled again; if
one cannot be placed, the cheapest spillable neighbours that block one of its placements are
spilled instead. A budget that one instruction alone exceeds is refused up front with an error
naming the instruction.

The allocator itself is pluggable (:mod:`api`): ``briggs`` (:mod:`briggs`, seeds 000-002),
``fatpoint`` (:mod:`fatpoint`, seed 004), ``linear`` (:mod:`linear`) or any other registered
one; every allocator sees the program only through :class:`~api.Problem` and returns a
:class:`~api.Coloring`. The driver coalesces copies first when the allocator asks for it
(``coalesces``), and opens one :class:`~session.Session` per function, which may also move
spill slots once they are laid out and add notes and fields to the report (:mod:`session`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ..analysis import Liveness, Pressure, analyze_function
from ..analysis.tuples import find_tuples
from ..errors import AllocationError
from ..ir import isa
from ..ir.build import width_bytes
from ..ir.cfg import CFG
from ..ir.module import Function
from ..spill.lazy import remove_redundant_spill_code
from ..spill.remat import COMPUTE_COST, remat_candidates
from ..spill.rewrite import SpillState, rewrite_spills
from ..spill.slots import LOAD_KINDS, STORE_KINDS, assign_slots
from ..target.abi import Convention
from ..target.sm import SMProfile
from ..target.units import GPR, PRED, RegFile, vreg_shape
from ..util import bits, gc_paused
from . import api, convention, output
from .api import Coloring, Problem
from .asynchrony import bind_async_waits
from .coalesce import COALESCE_FACTOR, coalesce
from .compact import compact, high_water
from .legalize import legalize_tuples
from .matrix import UnitMatrix
from .serialize_wgmma import group_shapes, operand_shapes, serialize_wgmma
from .session import Session

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
    """What allocating one function produced; ``report()`` is its row of the JSON report."""

    name: str
    allocator: str
    budget: int
    registers: int = 0
    predicates: int = 0
    max_live: int = 0               # the function as written: what ``analyze`` reports
    max_live_legalized: int = 0     # what the allocator starts from (see _max_live_as_written)
    max_live_predicates: int = 0    # predicates live at once in the function as written
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
    function: Function | None = None          # the allocated function
    names: list[str] = field(default_factory=list)   # register id -> physical name
    notes: list[str] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)

    def report(self) -> dict:
        row = {k: getattr(self, k) for k in (
            "name", "allocator", "budget", "registers", "predicates")}
        # MaxLive has one shape in every report (``analyze`` has the same key)
        row["max_live"] = {"registers": self.max_live, "predicates": self.max_live_predicates}
        row.update({k: getattr(self, k) for k in (
            "max_live_legalized", "spill_stores_bytes", "spill_loads_bytes", "stack_frame_bytes", "spilled_values",
            "rematerialized", "moves", "moves_coalesced", "rounds", "verified")})
        row["seconds"] = {k: round(v, 6) for k, v in self.seconds.items()}
        row["warnings"] = self.warnings
        row.update(self.extra)
        return row

    @property
    def warnings(self) -> list[str]:
        """The notes that warn (a changed program: wgmma groups serialized), without the
        ``warning: `` prefix; the CLI prints them on stderr whatever ``-v`` says."""
        return [n[len("warning: "):] for n in self.notes if n.startswith("warning: ")]


def _max_live_as_written(fn: Function) -> tuple[int, int]:
    """MaxLive of the function as written, as ``analyze`` reports it. The allocator starts
    from a rewritten copy — tuple legalization's copies, the convention's binding copies, the
    registers of asynchronous instructions kept live until their wait — whose MaxLive
    (``max_live_legalized``) can be higher; both are reported, each under its own name.
    Returns the general registers and the predicates."""
    cfg = CFG(fn)
    p = Pressure(cfg, Liveness(cfg), find_tuples(fn, cfg.instrs))
    return p.max_live, p.max_preds


def check_feasible(fn: Function, regfile: RegFile, pinned: set[int],
                   name: Callable[[int], str]) -> None:
    """Refuse a budget that one instruction's operands alone exceed (SPEC section 2). The
    instructions that carry register tuples are checked first, so that a tuple too wide for
    the budget is blamed on the tensor or vector instruction that needs it, not on a ``mov``
    that merely writes one member; ``name`` gives registers their names in the input."""
    regs = fn.regs
    groups = group_shapes(fn)
    instrs = fn.instructions()
    instrs.sort(key=lambda ins: not isa.tuple_operands(ins, regs))      # stable
    for ins in instrs:
        # a guarded definition may keep the old value: it must be in its register before, as
        # the uses are
        before = ins.uses + ins.defs if ins.guard >= 0 else ins.uses
        for values in (before, ins.defs):
            shapes = operand_shapes(fn, values, groups, pinned)
            if shapes and not regfile.fits(shapes):
                need = sum(s.units for s in shapes) / 2
                tuples = [s for s in shapes if s.units > 8 or str(s).startswith("TUPLE")]
                what = (f"{len(shapes)} operand(s), among them a {tuples[0].units / 2:g}-register "
                        f"tuple aligned to {tuples[0].align // 2}" if tuples else
                        f"{len(shapes)} operand(s)")
                raise AllocationError(
                    f"{fn.filename}:{ins.line}: function '{fn.name}': "
                    f"'{ins.render(name)}' needs {need:g} registers at once ({what}), more than "
                    f"the budget of {regfile.k} allows")


def _spillable(problem: Problem, node: int, unspillable: set[int]) -> list[int]:
    """The members of a node that may be spilled: not spill temporaries, not bound to a
    convention register (coalescing may have merged such registers with ordinary values)."""
    return [v for v in problem.members[node] if v not in unspillable]


def _relieve(problem: Problem, coloring: Coloring, node: int,
             unspillable: set[int]) -> tuple[set[int], int | None] | None:
    """How the unspillable ``node`` gets a placement next round: the registers to spill (the
    spillable members of the colored neighbours on one placement) and, when that placement is
    also held by neighbours that cannot be spilled but can move (other temporaries), the
    placement to fix ``node`` to, so that those move elsewhere. A neighbour fixed by the
    convention gives way too when ordinary values were coalesced into it: spilling them leaves
    the convention's short-lived register alone. The placement needing fewest moves, then the
    cheapest spills, wins; None when every placement is held by a convention register
    alone."""
    matrix = UnitMatrix.for_problem(problem, coloring.start)
    costs = problem.reg_cost
    best = None
    for s, _ in problem.regfile.placements(problem.shape[node]):
        cost = 0.0
        moved = 0
        chosen: list[int] = []
        for m in bits(matrix.conflicts(node, s)):
            members = _spillable(problem, m, unspillable)
            if not members:
                if m in problem.precolored:
                    break           # a convention register alone: it cannot go anywhere
                moved += 1
                continue
            cost += sum(costs[v] for v in members)
            chosen.extend(members)
        else:
            key = (moved, cost)
            if best is None or key < best[0]:
                best = (key, set(chosen), s if moved else None)
    return (best[1], best[2]) if best else None


def _stuck_message(fn: Function, problem: Problem, node: int, budget: int,
                   name: Callable[[int], str]) -> str:
    v = problem.members[node][0]
    for ins in fn.instructions():
        if v in ins.defs or v in ins.uses:
            return (f"{fn.filename}:{ins.line}: function '{fn.name}': cannot allocate "
                    f"'{ins.render(name)}' within {budget} registers: its operands and the "
                    f"values that must stay live across it (registers bound by the calling "
                    f"convention, registers of asynchronous tensor instructions) do not fit")
    return f"function '{fn.name}': cannot allocate within {budget} registers"


def _original_names(fn: Function, origin_of: dict[int, int]) -> Callable[[int], str]:
    """Register id of the working function -> the name of the value it carries in the input
    (spill temporaries and copies have internal names)."""
    names = fn.regs.names

    def name(v: int) -> str:
        return names[origin_of.get(v, v)]
    return name


def _callee_saved_preference(analysis, conv: Convention, info) -> dict[int, int]:
    """Values live across a call prefer the callee-saved registers (no save around calls)."""
    if info.leaf or not len(conv.callee_saved):
        return {}
    mask = conv.callee_saved_units()
    across = 0
    for live in convention.live_across_calls(analysis.cfg, analysis.liveness).values():
        across |= live
    return {v: mask for v in bits(across)}


def allocate_function(fn: Function, sm: SMProfile, budget: int,
                      options: Options | None = None,
                      module_decls: list[str] | None = None) -> FunctionResult:
    """Allocate one function to ``budget`` registers; ``module_decls`` are the module-level
    declaration texts (for the sizes of ``.param`` symbols declared there)."""
    options = options or Options()
    try:
        allocator = api.get(options.allocator)
    except KeyError:
        raise AllocationError(f"unknown allocator '{options.allocator}' "
                              f"(known: {', '.join(sorted(api.names()))})") from None
    seconds: dict[str, float] = {}

    def tick(phase: str, t0: float) -> float:
        t = time.perf_counter()
        seconds[phase] = seconds.get(phase, 0.0) + t - t0
        return t

    with gc_paused():
        t = time.perf_counter()
        result = FunctionResult(fn.name, options.allocator, budget)
        conv = Convention(budget)
        pinned = {p.vid for p in fn.params + fn.returns if p.space == "reg" and p.vid >= 0}
        origin_of = {v: v for v in range(len(fn.regs))}
        session = allocator.open(fn, budget, options)
        work = fn.copy()
        result.moves = sum(1 for ins in fn.instructions() if ins.is_copy)
        legalize_tuples(work, origin_of)
        info = convention.prepare(work, conv, module_decls or [], origin_of)
        regfile = RegFile(budget, reserved=convention.callee_saved_reserved(conv, info, work))
        original_name = _original_names(fn, origin_of)
        result.notes.extend(serialize_wgmma(work, regfile, pinned, original_name))
        check_feasible(work, regfile, pinned, original_name)
        in_flight = bind_async_waits(work)
        state = SpillState(output.spill_array_name(fn, SPILL_ARRAY), origin_of)
        state.no_spill |= in_flight
        t = tick("legalize", t)
        first_max_live = None
        # temporaries precolored to a placement after getting stuck (:func:`_relieve`)
        relief_precolored: dict[int, int] = {}
        while True:
            result.rounds += 1
            if result.rounds > MAX_ROUNDS:
                raise AllocationError(f"function '{fn.name}': allocation did not converge in "
                                      f"{MAX_ROUNDS} rounds at budget {budget}")
            remat = {v: d for v, d in remat_candidates(work, work.instructions()).items()
                     if v not in pinned and v not in info.precolored}
            analysis = analyze_function(work, sm, {v: COMPUTE_COST for v in remat},
                                        state.no_spill | pinned)
            if first_max_live is None:
                first_max_live = analysis.pressure.max_live
                written_max_live = (_max_live_as_written(fn)
                                    if len(work.regs) != len(fn.regs) or in_flight
                                    else (first_max_live, analysis.pressure.max_preds))
            if info.active:
                convention.cost_factors(analysis, conv, info)
            problem = Problem.from_analysis(
                analysis, regfile, {**info.precolored, **relief_precolored}, pinned,
                prefer=_callee_saved_preference(analysis, conv, info))
            t = tick("analysis", t)
            if allocator.coalesces:
                coalesce(problem, options.coalesce_factor)
                t = tick("coalesce", t)
            coloring = session.color(problem, options)
            t = tick("color", t)
            if not coloring.spilled:
                if options.compact:
                    problem, coloring = _compacted(problem, coloring, analysis, regfile, conv,
                                                   info, pinned)
                break
            to_spill: set[int] = set()
            unspillable = state.no_spill | set(info.precolored) | pinned
            for node in coloring.spilled:
                members = _spillable(problem, node, unspillable)
                if not members:
                    relief = _relieve(problem, coloring, node, unspillable)
                    if relief is None or (not relief[0] and relief[1] is None) or (
                            not relief[0] and any(v in relief_precolored
                                                  for v in problem.members[node])):
                        raise AllocationError(_stuck_message(work, problem, node, budget,
                                                             original_name))
                    members, place = relief
                    if place is not None:
                        for v in problem.members[node]:
                            relief_precolored[v] = place + problem.offset[v]
                to_spill.update(members)
            if to_spill:
                work = rewrite_spills(work, to_spill, remat, state)
            t = tick("spill", t)
        result.max_live, result.max_live_predicates = written_max_live or (0, 0)
        result.max_live_legalized = first_max_live or 0
        _finish(fn, work, problem, coloring, state, result, sm, budget, options, pinned,
                conv, info, analysis, session)
        session.finish(result)
        tick("output", t)
    result.seconds = seconds
    return result


def _compacted(problem: Problem, coloring: Coloring, analysis, regfile: RegFile,
               conv: Convention, info, pinned: set[int]) -> tuple[Problem, Coloring]:
    """Compaction (:mod:`compact`) of the final coloring; when it stays above MaxLive, also of
    the same graph before coalescing (merging copies can lengthen live ranges and cost a
    register), keeping whichever uses fewer registers (the coalesced one on a tie)."""
    bound = analysis.pressure.max_live
    penalty = _caller_save_penalty(analysis, conv, problem, info)
    compact(problem, coloring, bound, penalty=penalty)
    registers = high_water(problem, coloring.start)
    if coloring.optimal or registers <= bound:
        return problem, coloring
    plain = Problem.from_analysis(analysis, regfile, info.precolored, pinned,
                                  prefer=problem.prefer_by_reg)
    fresh = Coloring()
    if compact(plain, fresh, bound, penalty=_caller_save_penalty(analysis, conv, plain, info),
               to_beat=(registers, penalty(coloring.start) if penalty else None)):
        return plain, fresh
    return problem, coloring


def _caller_save_penalty(analysis, conv: Convention, problem: Problem, info):
    """How many (call, value) pairs a coloring would have to save around calls: compaction
    must not make it worse."""
    if info.leaf:
        return None
    across = list(convention.live_across_calls(analysis.cfg, analysis.liveness).values())
    caller = conv.caller_saved_units()

    def penalty(start: dict[int, int]) -> int:
        count = 0
        for live in across:
            for v in bits(live):
                n = problem.find(v)
                s = start.get(n)
                if s is None or problem.shape[n].file != GPR:
                    continue
                if problem.shape[n].mask(s + problem.offset[v]) & caller:
                    count += 1
        return count
    return penalty


def _finish(original: Function, work: Function, problem: Problem, coloring: Coloring,
            state: SpillState, result: FunctionResult, sm: SMProfile, budget: int,
            options: Options, pinned: set[int], conv: Convention, info, analysis,
            session: Session) -> None:
    regs = work.regs
    start = problem.register_starts(coloring.start)
    shapes = {v: vreg_shape(regs.classes[v], regs.vec[v]) for v in start}
    used_units = 0
    for v, s in start.items():
        if shapes[v].file == GPR:
            used_units |= shapes[v].mask(s)
    clobbers: dict[int, int] = {}
    if info.active:
        convention.insert_call_saves(work, analysis.cfg, analysis.liveness, start, shapes,
                                     conv, info, state)
        extra: dict[int, int] = {}
        convention.insert_callee_saves(work, used_units, conv, info, state, extra)
        for v, s in extra.items():
            start[v] = s
            shapes[v] = vreg_shape(regs.classes[v], regs.vec[v])
    mask_of: dict[int, int] = {}
    for v, s in start.items():
        m = shapes[v].mask(s)
        mask_of[v] = m if shapes[v].file == GPR else m << 1024     # predicates: a file apart
    cfg = CFG(work)
    if not info.leaf:
        caller = conv.caller_saved_units()
        for ins in cfg.instrs:
            if convention.is_call(ins):
                clobbers[id(ins)] = caller
    redundant = remove_redundant_spill_code(cfg, mask_of, clobbers)
    if redundant:
        work.body = [s for s in work.body if id(s) not in redundant]
        cfg = CFG(work)
    frame = session.slots(cfg, assign_slots(cfg, state.slot_size, state.array))
    stem = output.choose_stem(original)
    names = list(regs.names)
    for v, s in start.items():
        names[v] = output.physical_name(regs, v, s, stem)
    removed_copies = set()          # original copies whose ends share a register
    dropped = set()                 # inserted copies whose ends share a register
    for ins in cfg.instrs:
        if ins.is_copy and names[ins.defs[0]] == names[ins.uses[0]]:
            (removed_copies if ins.origin is None else dropped).add(id(ins))
    if dropped:
        work.body = [s for s in work.body if id(s) not in dropped]
        cfg = CFG(work)
    used_names = set()
    stores = loads = 0
    for ins in cfg.instrs:
        if id(ins) not in removed_copies:
            for v in ins.defs + ins.uses:
                if v not in pinned and v in start:
                    used_names.add(names[v])
        output.annotate(ins, original.regs)
        o = ins.origin
        if o and o[0] in STORE_KINDS:
            stores += width_bytes(regs, ins.uses[0])
        elif o and o[0] in LOAD_KINDS:
            loads += width_bytes(regs, ins.defs[0])
    # the high-water marks cover whole placements (a tuple's sink members included)
    preds = [s for node, s in coloring.start.items() if problem.shape[node].file == PRED]
    header = (f"//@ptxalloc allocator={options.allocator} budget={budget} arch={sm.name} "
              f"stem={stem}" + (f" spill={state.array} frame={frame}" if frame else "")
              + (" abi=1" if info.active else "") + (" leaf=1" if info.leaf else ""))
    array_decl = f".local .align 16 .b8 {state.array}[{frame}];" if frame else None
    out = work.copy()
    out.body = output.build_body(work, header, output.declarations(used_names, stem),
                                 array_decl, removed_copies)
    result.function = out
    result.names = names
    result.registers = high_water(problem, coloring.start)
    result.predicates = max(preds, default=-1) + 1
    result.spill_stores_bytes = stores
    result.spill_loads_bytes = loads
    result.stack_frame_bytes = frame
    result.spilled_values = len(state.spilled_values)
    result.rematerialized = len(state.rematerialized)
    result.moves_coalesced = len(removed_copies)
    result.extra["registers_optimal"] = coloring.optimal
    if info.active:
        result.extra["convention"] = info.report()
        result.notes.append(_convention_note(conv, info))


def _convention_note(conv: Convention, info) -> str:
    cs = conv.callee_saved
    clip = ("" if len(cs) == len(range(24, 31)) else
            f" (budget {conv.k}: {'no' if not len(cs) else f'only R{cs.start}-R{cs.stop - 1}'}"
            f" callee-saved registers; values live across calls are saved around them)")
    used = ", ".join(f"R{r}" for r in info.callee_saved_used) or "none"
    return (f"calling convention: {'leaf' if info.leaf else 'non-leaf'}, {info.calls} call(s), "
            f"{info.tail_calls} tail call(s), {info.values_across_calls} value(s) live across "
            f"calls, callee-saved used: {used}, {info.save_restore_bytes} bytes saved and "
            f"restored{clip}")
