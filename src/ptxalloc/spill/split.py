"""Live-range splitting of spilled values: where one reload may serve several uses (seed 002
"Live Range Splitting for Spills", "Spill Code Optimization"; in the manner of LLVM's greedy
allocator, ``SplitKit`` region splitting; issue 13).

Spill-everywhere (:mod:`rewrite`) gives every use of a spilled register its own reload into a
short temporary. When the register has to leave its register file only because of a crowded
stretch somewhere in its live range, that is more memory traffic than needed. This module
plans, for each register about to be spilled, *runs*: groups of its occurrences served by one
temporary.

* **Around uses** (knob ``SpillSplitRegions``): along a block, and on into a following block
  that has no other way in (an extended block), consecutive uses of the value share one
  temporary — reloaded once before the first, or the one its definition wrote — as long as the
  temporary fits at every instruction from one occurrence up to the next.
* **At loop boundaries** (knob ``SpillSplitLoops``): a value live into a loop that never
  defines it, where no instruction of the loop (nor the end of its preheader) is over the
  register file, is reloaded once at the end of the preheader and every use in the loop reads
  that temporary: in a register inside the loop, in memory across the code around it. The
  outermost such loop is chosen.

A run's temporary is an ordinary register, given a low spill cost (spilling it again only
brings back the reloads the run saved, as LLVM spills split products first): it may be
colored, or spilled in a later round. A
spilled run temporary does not get a slot of its own: its *home* is the slot of the value it
was split from (``SpillState.home``), its reload is dropped and each of its uses reloads from
that slot (:func:`ptxalloc.spill.rewrite.rewrite_spills`). The code is still only stores,
reloads and uses of the value's slot, so the allocation checker proves it as it proves
spill-everywhere.
"""

from __future__ import annotations

from ..analysis import FunctionAnalysis
from ..analysis.liveness import instr_gen_kill
from ..ir.cfg import _TERMINATORS
from ..ir.registers import RegClass
from ..records import field, record


@record
class SplitPlan:
    """The runs chosen for one spill round. ``run_of[(id(instr), reg)]`` is the run that the
    occurrence of ``reg`` at ``instr`` belongs to (an occurrence in no run is spilled
    everywhere); ``loop_reloads[id(instr)]`` lists ``(reg, run)`` reloads placed at the end
    of a preheader: before ``instr`` when it is the preheader's terminator, after it
    otherwise (``after``); ``reload_at`` holds the occurrences (as in ``run_of``) where a run
    starts with a reload. The runs of ``window_runs`` span a ``wgmma`` group's in-flight window
    (:mod:`windows`): their reload is one of ``loop_reloads`` (before the window's
    ``wgmma.fence``), their definitions get no store after them but one after the window's
    wait (``stores_after[id(instr)]``: ``(reg, run)`` stores placed after ``instr``), and their
    temporary is never spilled."""

    run_of: dict[tuple[int, int], int] = field(default_factory=dict)
    loop_reloads: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    after: set[int] = field(default_factory=set)
    reload_at: set[tuple[int, int]] = field(default_factory=set)
    runs: int = 0
    window_runs: set[int] = field(default_factory=set)
    stores_after: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    def new_run(self) -> int:
        self.runs += 1
        return self.runs


def plan_splits(analysis: FunctionAnalysis, spill: set[int], keep_out: set[int],
                limit: float, *, regions: bool, loops: bool) -> SplitPlan:
    """The runs for the registers of ``spill`` (only whole general registers outside tuples
    and outside ``keep_out`` are split) when at most ``limit`` 32-bit registers can be live at once.

    The room is counted on the *residual* pressure: at each instruction, the round's pressure
    less the registers of ``spill`` live there (they all leave their registers), plus the run
    temporaries already planned. A run is extended over a stretch only while the residual
    pressure there stays within ``limit`` with the run's register added."""
    plan = SplitPlan()
    cfg = analysis.cfg
    classes = cfg.fn.regs.classes
    grouped = analysis.tuples.group_of
    if not (regions or loops):
        return plan
    units = analysis.pressure.units
    residual = _residual_pressure(analysis, spill, units)
    cand = {v for v in spill
            if classes[v] != RegClass.PRED and v not in grouped and v not in keep_out}
    if not cand:
        return plan

    def room(i: int, j: int, width: float) -> bool:
        """Whether the instructions with ids in [i, j) have room for ``width`` more."""
        return i >= j or max(residual[i:j]) + width <= limit

    def take(ids, width: float) -> None:
        for i in ids:
            residual[i] += width

    if loops:
        _plan_loops(analysis, cand, room, take, units, plan)
    if regions:
        _plan_regions(analysis, cand, room, take, units, plan)
    return plan


def _residual_pressure(analysis: FunctionAnalysis, spill: set[int], units: list[int]
                       ) -> list[float]:
    """Per instruction id, the round's general-register pressure less the registers of
    ``spill`` live there (the same points as :class:`~ptxalloc.analysis.pressure.Pressure`:
    live after the instruction, with its definitions)."""
    cfg = analysis.cfg
    residual = list(analysis.pressure.gpr)
    by_width: dict[int, int] = {}
    for v in spill:
        if units[v] and cfg.fn.regs.classes[v] != RegClass.PRED:
            by_width[units[v]] = by_width.get(units[v], 0) | 1 << v
    if not by_width:
        return residual
    everything = 0
    for m in by_width.values():
        everything |= m
    widths = list(by_width.items())
    live_out = analysis.liveness.live_out
    for b in cfg.blocks:
        live = live_out[b.id] & everything
        for k in range(len(b.instrs) - 1, -1, -1):
            ins = b.instrs[k]
            gen, kill = instr_gen_kill(ins)
            point = live
            for d in ins.defs:
                point |= 1 << d
            point &= everything
            if point:
                residual[b.first + k] -= sum(u * (point & m).bit_count() for u, m in widths) / 2
            live = ((live & ~kill) | gen) & everything
    return residual


def _plan_loops(analysis: FunctionAnalysis, cand: set[int], room, take, units,
                plan: SplitPlan) -> None:
    cfg = analysis.cfg
    blocks = cfg.blocks
    live_in = analysis.liveness.live_in
    mask = 0
    for v in cand:
        mask |= 1 << v
    for lp in sorted(cfg.loops, key=lambda lp: lp.depth):      # outermost first
        header = blocks[lp.header]
        outside = [p for p in header.preds if p not in lp.blocks]
        if len(outside) != 1:
            continue
        pre = blocks[outside[0]]
        if pre.succs != [lp.header] or not pre.instrs:
            continue
        across = live_in[lp.header] & mask
        if not across:
            continue
        last = pre.instrs[-1]
        last_id = pre.first + len(pre.instrs) - 1
        is_term = last.opcode.split(".", 1)[0] in _TERMINATORS
        covered = [last_id]
        for b in lp.blocks:
            covered.extend(range(blocks[b].first, blocks[b].first + len(blocks[b].instrs)))
        defined = 0
        uses: dict[int, list[int]] = {}
        for b in lp.blocks:
            for ins in blocks[b].instrs:
                for d in ins.defs:
                    defined |= 1 << d
                for u in ins.uses:
                    if across >> u & 1:
                        uses.setdefault(u, []).append(id(ins))
        used_by_last = set(last.uses) if is_term else set()
        for v, where in uses.items():
            if defined >> v & 1 or v in used_by_last or \
                    any((i, v) in plan.run_of for i in where):
                continue
            width = units[v] / 2
            if not all(room(i, i + 1, width) for i in covered):
                continue
            take(covered, width)
            run = plan.new_run()
            for i in where:
                plan.run_of[(i, v)] = run
            plan.loop_reloads.setdefault(id(last), []).append((v, run))
            if not is_term:
                plan.after.add(id(last))


def _plan_regions(analysis: FunctionAnalysis, cand: set[int], room, take, units,
                  plan: SplitPlan) -> None:
    """Runs of consecutive occurrences along an extended block: a block whose only
    predecessor is ``p`` continues the runs open at the end of ``p`` (the temporary is
    defined on the only way in)."""
    cfg = analysis.cfg
    blocks = cfg.blocks
    exit_state: dict[int, dict] = {}
    runs: list[tuple[int, list, bool]] = []          # (register, events, starts with a use)
    order = cfg.rpo + [b.id for b in blocks if not b.reachable]
    for bid in order:
        b = blocks[bid]
        # v -> (ranges passed and not yet taken, last occurrence's id, the run's events)
        open_run: dict[int, tuple[list, int, list]] = {}
        if bid != 0 and len(b.preds) == 1 and b.preds[0] in exit_state:
            p = blocks[b.preds[0]]
            p_end = p.first + len(p.instrs)
            for v, (passed, last, events) in exit_state[b.preds[0]].items():
                open_run[v] = (passed + [(last, p_end)], b.first, events)
        for k, ins in enumerate(b.instrs):
            i = b.first + k
            used = [u for u in dict.fromkeys(ins.uses) if u in cand]
            defined = [d for d in dict.fromkeys(ins.defs) if d in cand]
            for v in used:
                if (id(ins), v) in plan.run_of or v in defined:
                    open_run.pop(v, None)
                    continue
                cur = open_run.get(v)
                width = units[v] / 2
                if cur is not None:
                    spans = cur[0] + [(cur[1], i)]
                    if all(room(lo, hi, width) for lo, hi in spans):
                        for lo, hi in spans:
                            take(range(lo, hi), width)
                        cur[2].append(id(ins))
                        open_run[v] = ([], i, cur[2])
                        continue
                events = [id(ins)]
                runs.append((v, events, True))
                open_run[v] = ([], i, events)
            for v in defined:
                open_run.pop(v, None)
                if ins.guard < 0 and v not in ins.uses:
                    events = [id(ins)]
                    runs.append((v, events, False))
                    open_run[v] = ([], i, events)
        exit_state[bid] = open_run
    for v, events, reloads in runs:
        if len(events) > 1:
            run = plan.new_run()
            for i in events:
                plan.run_of[(i, v)] = run
            if reloads:
                plan.reload_at.add((events[0], v))
