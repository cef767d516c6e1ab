"""Allocating a whole module: every function (or the one asked for) in turn, the allocated
functions written back into the module's text, each allocation checked (SPEC sections 8, 9).

Each function's budget, and where it came from (the report's ``budget_from``, the first ``-v``
note):

* ``registers=None`` (the default): ptxas's register limit for the function — its directives,
  ``maxrregcount``/``override_directive_values`` as ptxas's flags, the calling kernels' limit for
  a ``.func`` (:mod:`ptxalloc.target.register_limit`);
* ``registers=K``: K, whatever the directives say;
* ``registers="seed"``: the seeds' CICC constant K = 15;
* ``registers="auto"``: seed 004's occupancy-aware model (:mod:`ptxalloc.target.budget`) from
  the function's MaxLive, below ptxas's limit; its reasoning also lands in ``budget_reason``."""

from __future__ import annotations

from .alloc.driver import FunctionResult, Options, allocate_function
from .alloc.output import (hoist_lines, mark_prepass, neutral, promote_lines,
                           schedule_lines)
from .analysis.sources import source_files
from .analysis.static_shared import own_static_shared
from .errors import AllocationError, InternalError, UsageError
from .ir.module import Function, Module
from .ir.recompute import record_lines
from .ptx import emit_function, emit_module
from .ptx.parser import parse
from .records import field, record, replace
from .report.spill_report import explain_spills
from .target.occupancy import block_size, occupancy
from .target.register_limit import RegisterLimit, fixed_budgets
from .target.sm import SMProfile, profile_for_module



@record
class ModuleResult:
    """An allocated module: its PTX text, one :class:`FunctionResult` per allocated function,
    and the target profile."""

    ptx: str
    functions: list[FunctionResult] = field(default_factory=list)
    sm: SMProfile | None = None
    filename: str | None = None

    def report(self) -> dict:
        """The ``allocate --json`` report (docs/report-schema.md)."""
        from .report.schema import header
        return {**header("allocate", self.filename, self.sm.name if self.sm else None),
                "functions": [f.report() for f in self.functions]}


def auto_budget(fn, sm: SMProfile, knobs: dict[str, float] | None = None,
                limit: RegisterLimit | None = None, occupancy_target: float | None = None):
    """The budget ``--registers auto`` gives ``fn``: seed 004's occupancy-aware model fed with
    the function's MaxLive, its alignment penalty and the largest single-instruction need
    (:func:`ptxalloc.analysis.need.largest_need`, the rule that refuses a budget)."""
    from .alloc.knobs import resolve
    from .analysis import pressure_of
    from .analysis.need import largest_need
    from .ir.registers import RegClass
    from .target.budget import choose_budget
    from .target.units import vreg_shape

    pressure = pressure_of(fn)
    regs = fn.regs
    max_live = pressure.max_live
    wide = any(regs.classes[v] != RegClass.PRED and vreg_shape(regs.classes[v], regs.vec[v]).units >= 4
               for v in pressure.peak.live)
    pair_penalty = 1 if wide and max_live % 2 else 0
    return choose_budget(sm, fn.directives, max_live, pair_penalty, 0, largest_need(fn),
                         resolve(knobs), limit, occupancy_target=occupancy_target)


def pre_passes(original: Function, options: Options,
               module_decls: list[str] = ()) -> tuple[Function, list[tuple]]:
    """The function the allocator is given: ``original`` through the pre-passes the knobs
    switch on, in seed 004's order — ``hoist`` (:mod:`ptxalloc.passes.hoist`), ``promote``
    (:mod:`ptxalloc.passes.promote`) — then ``induction`` (:mod:`ptxalloc.passes.induction`,
    kept only when MaxLive after ``recompute`` is lower with it), ``recompute``
    (:mod:`ptxalloc.passes.recompute`) and ``schedule`` (:mod:`ptxalloc.passes.schedule`), each
    one's output the next one's input (where the recomputation offers two plans, predicates
    traded for their operands' ranges or not, each is scheduled and the one needing fewest
    registers kept) —
    and, per pass that changed something, (knob, its record's ``//@`` lines, its report),
    which :func:`~ptxalloc.alloc.output.mark_prepass` writes into the output for the checker
    to replay."""
    from .alloc.knobs import resolve
    knobs = resolve(options.knobs)
    fn = original
    marks = []
    if knobs["hoist"]:
        from .passes.hoist import hoist_function
        hoisted = hoist_function(fn, innermost_only=knobs["hoist"] == 2)
        if hoisted:
            fn = hoisted.function
            marks.append(("hoist", hoist_lines(hoisted.groups), hoisted.report()))
    if knobs["promote"]:
        from .passes.promote import promote_function
        promoted = promote_function(fn, "\n".join(module_decls))
        if promoted:
            fn = promoted.function
            marks.append(("promote", promote_lines(promoted.arrays), promoted.report()))
    if knobs["induction"]:
        from .passes.induction import induction_function, worth_it
        induced = induction_function(fn)
        if induced:
            recomputed = _recomputed(fn, knobs["recompute"])
            both = _recomputed(induced.function, knobs["recompute"])
            if worth_it(induced, recomputed.function if recomputed else fn,
                        both.function if both else induced.function):
                fn = induced.function
                marks.append(("induction", [f.line() for f in induced.families],
                              induced.report()))
    choices = [None]
    if knobs["recompute"]:
        from .passes.recompute import recompute_choices
        choices = recompute_choices(fn, chains=knobs["recompute"] >= 2)
    # each recomputation with the schedule after it; of several (predicates traded for their
    # operands' ranges or not), the one whose result needs fewest registers
    best = None
    for recomputed in choices:
        start = recomputed.function if recomputed else fn
        scheduled = None
        if knobs["schedule"]:
            from .passes.schedule import schedule_function
            scheduled = schedule_function(start, bool(knobs["ScheduleStoresLast"]))
        if len(choices) > 1:
            from .analysis import pressure_of
            from .passes.recompute import registers_needed
            p = pressure_of(scheduled.function if scheduled else start)
            need = registers_needed((p.max_live, p.max_preds))
        else:
            need = 0
        if best is None or need < best[0]:
            best = (need, recomputed, scheduled)
    _, recomputed, scheduled = best
    if recomputed:
        fn = recomputed.function
        marks.append(("recompute", record_lines(recomputed.records, recomputed.dead),
                      recomputed.report()))
    if scheduled:
        fn = scheduled.function
        marks.append(("schedule", schedule_lines(scheduled.order), scheduled.report()))
    return fn, marks


def _recomputed(fn: Function, level: int):
    """:func:`ptxalloc.passes.recompute.recompute_function` at the knob's ``level`` (2: with
    chains), or None when it is off or changes nothing."""
    if not level:
        return None
    from .passes.recompute import recompute_function
    return recompute_function(fn, chains=level >= 2)


def pre_pass_note(key: str, report: dict) -> str:
    """The ``-v`` line saying what a pre-pass did (its report: docs/report-schema.md)."""
    if key == "hoist":
        return (f"hoisted {report['hoisted']} loop-invariant instructions out of "
                f"{report['loops']} loops")
    if key == "promote":
        return (f"promoted {report['arrays']} .local arrays ({report['local_bytes']} bytes, "
                f"{report['accesses']} loads and stores) to {report['slots']} registers")
    if key == "induction":
        return (f"rewrote {report['families']} loop-carried pointer families "
                f"({report['pointers']} pointers) as induction variables: MaxLive after "
                f"recomputation {report['max_live_before']} -> {report['max_live_after']}")
    if key == "recompute":
        return (f"recomputed {report['values']} values at their uses ({report['inserted']} "
                f"instructions inserted): MaxLive {report['max_live_before']} -> "
                f"{report['max_live_after']}")
    return f"scheduled: {report['moved']} instructions moved in {report['segments']} segments"


def spill_bytes(res: FunctionResult) -> int:
    """The bytes a function's spill code stores and loads."""
    return res.spill_stores_bytes + res.spill_loads_bytes


#: The largest function (instructions as written) allocated a second time in the order as
#: written: a compile-time budget. Every gain measured on the corpus and the Triton set was on
#: functions of at most 813 instructions (pns, bisect_large, Triton softmax and layer norm),
#: while Triton's attn_bwd (4,175 instructions, spilling at its default budget of 255) took
#: 1.96 -> 3.84 s CPU and matrix_free's three HelmholtzOperator functions (1,716-1,994, at
#: their default budget) 4.0 -> 4.9 s, all for no gain (docs/decisions.md, "The schedule or
#: the code as written").
SECOND_ORDER_MAX_INSTRUCTIONS = 1000


def keep_cheaper_order(original: Function, options: Options, decls: list[str],
                       fn: Function, marks: list[tuple], res: FunctionResult,
                       allocate, unscheduled=None) -> tuple[Function, list[tuple], FunctionResult]:
    """The allocation kept of ``original``: ``res``, the allocation of ``fn`` (``original``
    through :func:`pre_passes`, their records ``marks``), or, with the ``schedule`` knob at 2
    where ``res`` spills values (spill bytes besides callee-saved registers' saves) and the
    schedule moved something, the allocation (``allocate(f)``) of the same pre-passes with the
    schedule off, when it spills fewer bytes (on equal bytes, fewer registers; then the
    scheduled one); only for functions of at most ``SECOND_ORDER_MAX_INSTRUCTIONS``. The
    schedule lowers peak pressure, which does not decide the spill bytes below MaxLive; seed
    004's per-class driver (Allocator Architecture, "Per-Class Driver: sub_971A90") likewise
    allocates again under another strategy and keeps the best result (``record_best_result``).
    ``unscheduled`` (optional) gives that other pre-pass result, (function, marks), where the caller
    has it already. Returns (function, marks, result) of the kept order; its report's ``order`` says
    which and why."""
    from .alloc.knobs import resolve
    # only spills the budget forced: callee-saved registers' saves count in the spill bytes
    # but spill no value, and no order changes them
    # nor do predicates put in slots by choice (knob PredicateSlots: holding them in registers
    # stored nothing)
    if resolve(options.knobs)["schedule"] < 2 or spill_bytes(res) == 0 or \
            res.spilled_values == 0 or _slots_by_choice(res) or \
            not any(key == "schedule" for key, *_ in marks) or \
            len(original.instructions()) > SECOND_ORDER_MAX_INSTRUCTIONS:
        return fn, marks, res
    if unscheduled is None:
        plain_fn, plain_marks = pre_passes(
            original, replace(options, knobs={**options.knobs, "schedule": 0}), decls)
    else:
        plain_fn, plain_marks = unscheduled()
    report = {"kept": "scheduled", "spill_bytes_scheduled": spill_bytes(res),
              "registers_scheduled": res.registers}
    try:
        plain = allocate(plain_fn)
    except AllocationError as refused:
        report["as_written_refused"] = str(refused)
        res.extra["order"] = report
        res.notes.append(f"kept the scheduled order: as written, {refused}")
        return fn, marks, res
    report.update({"spill_bytes_as_written": spill_bytes(plain),
                   "registers_as_written": plain.registers})
    if (spill_bytes(plain), plain.registers) < (spill_bytes(res), res.registers):
        report["kept"] = "as written"
        fn, marks, res = plain_fn, plain_marks, plain
    res.extra["order"] = report
    res.notes.append(
        f"kept the {report['kept']} code: scheduled, it spills {report['spill_bytes_scheduled']} "
        f"bytes in {report['registers_scheduled']} registers; as written, "
        f"{report['spill_bytes_as_written']} bytes in {report['registers_as_written']}")
    return fn, marks, res


def _slots_by_choice(res: FunctionResult) -> bool:
    """Whether ``res`` stores spilled predicates in slots only to use fewer registers
    (:func:`ptxalloc.alloc.driver.allocate_function`, knob ``PredicateSlots``)."""
    return res.extra.get("predicate_slots", {}).get("kept") == "slots"


def allocate_kept(original: Function, options: Options, decls: list[str], fn: Function,
                  marks: list[tuple], allocate, unscheduled=None
                  ) -> tuple[Function, list[tuple], FunctionResult]:
    """The allocation kept of ``original`` (``fn`` and ``marks``: its :func:`pre_passes`
    output), ``allocate(f)`` allocating a function: ``fn``'s, or the other order's where
    :func:`keep_cheaper_order` keeps that; or, where the pre-passes make ``fn`` infeasible
    (a recomputed operand beside the other members of its tuple raises what one instruction
    needs at once), ``original``'s as written, the report saying why. Returns (function,
    marks, result) of what was kept."""
    try:
        res = allocate(fn)
    except AllocationError as refused:
        if fn is original:
            raise
        res = allocate(original)
        res.notes.append(f"pre-passes left out: with them, {refused}")
        res.extra["pre_passes_left_out"] = str(refused)
        return original, [], res
    return keep_cheaper_order(original, options, decls, fn, marks, res, allocate, unscheduled)


def check_registers(registers) -> None:
    """``registers`` is None, 'auto', 'seed' or a count from 1 to 255."""
    if registers in (None, "auto", "seed"):
        return
    if not isinstance(registers, int) or isinstance(registers, bool) or \
            not 1 <= registers <= 255:
        raise UsageError(f"registers must be a number from 1 to 255, 'auto' or 'seed', not "
                         f"'{registers}'")


def allocate_module(module: Module, registers: int | str | None = None,
                    allocator: str | None = None, arch: str | None = None,
                    function: str | None = None, verify: bool = True,
                    options: Options | None = None, maxrregcount: int | None = None,
                    override_directive_values: bool = False) -> ModuleResult:
    """Allocate the functions of a module; ``allocator`` (default: ``options.allocator``,
    else briggs) picks the allocator; ``registers`` the budgets (module docstring)."""
    sm = profile_for_module(arch, module)
    options = options or Options()
    if allocator is not None:
        options = replace(options, allocator=allocator)
    check_registers(registers)
    budgets = fixed_budgets(module, sm, registers, maxrregcount, override_directive_values)
    fns = module.functions
    if function is not None:
        fns = [f for f in fns if f.name == function]
        if not fns:
            raise UsageError(f"{module.filename}: no function named '{function}'")
    results = []
    texts = {}
    decls = module.declarations()
    files = source_files(module)
    for original in fns:
        fn, marks = pre_passes(original, options, decls)
        limit = budgets[fn.name]
        fn, marks, res = allocate_kept(
            original, options, decls, fn, marks,
            lambda f, original=original, limit=limit: _allocate_to(
                f, original, sm, limit, registers, options, decls))
        for key, lines, report in marks:
            mark_prepass(res.function, key, lines)
            res.extra[key] = report
            res.notes.append(pre_pass_note(key, report))
        res.extra["spills"] = explain_spills(fn, res, sm, files)
        res.extra["occupancy"] = _occupancy(sm, res, fn, decls)
        vectorize_spill_code(res, options)
        res.text = emit_function(res.function, res.names.__getitem__)
        texts[fn.name] = res.text
        results.append(res)
    if function is not None:
        # the functions written back unchanged keep no annotation of an earlier run either
        for f in module.functions:
            if f.name not in texts:
                body = [neutral(s) for s in f.body]
                if any(a is not b for a, b in zip(body, f.body)):
                    texts[f.name] = emit_function(f, body=body)
    text = emit_module(module, texts)
    check_within_budget(results)
    if verify:
        from .verify import verify_module_text
        verify_module_text(module, text, results)
    if options.stats:
        from .report.allocation_report import regalloc_stats
        for res in results:
            res.extra["regalloc_stats"] = regalloc_stats(res)
            del res.extra["graph"]
    return ModuleResult(text, results, sm, module.filename)


def vectorize_spill_code(res: FunctionResult, options: Options) -> None:
    """Adjacent spill accesses of the allocated function merged into vector accesses (knob
    ``SpillVectorize``, :mod:`ptxalloc.spill.vectorize`), after the figures and the spill
    explanation are taken (they count per value: spill bytes are bytes), recording in
    ``res.extra["spill_vectorize"]`` the instructions saved (``bench/quality.py`` calls it as
    this pipeline does)."""
    from .alloc import knobs as knob_table
    if res.function is None or not knob_table.resolve(options.knobs)["SpillVectorize"]:
        return
    from .spill.vectorize import merge_spill_accesses
    body, saved = merge_spill_accesses(res.function.body, res.function.regs,
                                       res.names.__getitem__)
    if saved:
        res.function.body = body
        res.extra["spill_vectorize"] = {"instructions_saved": saved}


def _allocate_to(fn: Function, original: Function, sm: SMProfile, limit, registers,
                 options: Options, decls: list[str]) -> FunctionResult:
    """Allocate ``fn`` (``original`` through the pre-passes, or ``original`` itself) to the
    budget ``limit``, or below it with ``--registers auto``; the result says where the budget
    came from."""
    # MaxLive is reported of the function as written (what analyze reports); the passes'
    # output is what max_live_legalized measures
    written = original if fn is not original else None
    if registers == "auto":
        budget = auto_budget(fn, sm, options.knobs, limit, options.occupancy_target)
        res = allocate_function(fn, sm, budget.registers, options, decls, written)
        res.extra["budget_from"] = f"--registers auto (seed 004), below {limit.source}"
        res.extra["budget_reason"] = budget.reason
        res.notes.insert(0, f"budget {budget.reason}")
    else:
        res = allocate_function(fn, sm, limit.registers, options, decls, written)
        res.extra["budget_from"] = limit.source
    return res


def _occupancy(sm: SMProfile, res: FunctionResult, fn, decls: list[str]) -> dict:
    """The occupancy of an allocated function at its launch bound's block size (else 256),
    counting the function's own static ``.shared``; with a shared spill area, at that area's
    block size and counting its bytes too (the area's ``occupancy_without`` is the same
    registers and the function's own shared memory without the area: what spilling to shared
    costs)."""
    area = res.extra.get("shared_spill")
    if area is None:
        return occupancy(sm, res.registers, block_size(fn.directives),
                         own_static_shared(fn, decls)).as_dict()
    own = area.get("own_bytes", 0)
    area["occupancy_without"] = occupancy(sm, res.registers, area["block_size"],
                                          own).as_dict()
    return occupancy(sm, res.registers, area["block_size"], area["bytes"] + own).as_dict()


def check_within_budget(results: list[FunctionResult]) -> None:
    """What the allocator knows of its own results without the checker (so also under
    ``--no-verify``): every function fits its budget of registers and the predicate file.
    Raises InternalError otherwise, before anything is written."""
    from .target.units import PRED_REGS

    for r in results:
        if not (0 <= r.registers <= r.budget and 0 <= r.predicates <= PRED_REGS):
            raise InternalError(f"function '{r.name}': the allocation uses {r.registers} "
                                f"registers and {r.predicates} predicates, more than its "
                                f"budget of {r.budget} and {PRED_REGS}")


def allocate_what_fits(module: Module, registers: int | str | None = None,
                       allocator: str | None = None,
                       verify: bool = True, options: Options | None = None,
                       ) -> tuple[ModuleResult, Module, dict[str, str]]:
    """Allocate every function the budget allows. A function refused with an AllocationError
    (an instruction needs more registers than the budget) is left out of the module. Returns
    the result, the module that was allocated and the refusals ({function: message})."""
    try:
        return allocate_module(module, registers, allocator, verify=verify,
                               options=options), module, {}
    except AllocationError:
        pass
    refused = {}
    for fn in module.functions:
        try:
            allocate_module(module, registers, allocator, function=fn.name, verify=False,
                            options=options)
        except AllocationError as e:
            refused[fn.name] = str(e)
    kept = module.without(set(refused))
    return allocate_module(kept, registers, allocator, verify=verify, options=options), kept, \
        refused


def allocate(ptx_text: str, registers: int | str | None = None, allocator: str = "briggs",
             arch: str | None = None, function: str | None = None, verify: bool = True,
             filename: str = "<input>", knobs: dict[str, float] | None = None,
             maxrregcount: int | None = None,
             override_directive_values: bool = False, uniform: bool = False,
             spill_to: str = "local", block_size: int | None = None) -> ModuleResult:
    """Allocate PTX text; returns the allocated PTX (``.ptx``) and the per-function report
    (``.report()``). ``registers``: None for ptxas's rule (with ``maxrregcount`` and
    ``override_directive_values`` as ptxas's ``-maxrregcount`` and
    ``--override-directive-values``), a budget, ``"seed"`` (15) or ``"auto"``; ``knobs`` are
    fat-point knobs by their ptxas names (:mod:`ptxalloc.alloc.knobs`); ``uniform`` places
    uniform values in UR/UP (:mod:`ptxalloc.alloc.uniform`); ``spill_to`` ``"shared"`` spills
    to a ``.shared`` area (:mod:`ptxalloc.spill.shared`; ``block_size``: the threads per block of
    a kernel without launch bounds)."""
    if spill_to not in ("local", "shared"):
        raise UsageError(f"spill_to must be 'local' or 'shared', not '{spill_to}'")
    options = Options(allocator=allocator, knobs=dict(knobs or {}), uniform=uniform,
                      spill_to=spill_to, block_size=block_size)
    return allocate_module(parse(ptx_text, filename), registers, allocator, arch, function,
                           verify, options, maxrregcount, override_directive_values)
