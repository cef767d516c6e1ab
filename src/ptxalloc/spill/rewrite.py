"""Spill rewriting (seed 002 "Store Insertion Algorithm", "Reload Insertion Algorithm";
SPEC section 5).

For every register chosen for spilling, every instruction that reads it gets a reload into a
new short-lived temporary just before it, and every instruction that writes it writes a new
temporary instead, stored to the register's slot just after it. A guarded or partial
definition (which may leave the old value in place) reloads first, so the store after it always
writes the right value. Temporaries are never spilled again.

Two other ways out:

* a rematerializable register (:mod:`remat`) is recomputed before each use by a copy of its
  definition, and the definition itself, now useless, is removed;
* a predicate (only P0-P6 exist) spills to a 32-bit register holding 0 or 1: ``selp.u32 b, 1,
  0, p`` after each definition and ``setp.ne.u32 p, b, 0`` before each use. That register is an
  ordinary value and may itself be spilled in a later round;
* with ``SpillState.pred_slots`` (knob ``PredicateSlots``, :mod:`ptxalloc.alloc.driver`) a
  predicate goes to a spill slot instead, its general-register range split around its
  definitions and uses (seed 002 "Live Range Splitting for Spills"): ``selp.u32 t, 1, 0, p`` and
  ``st.local.b32 [slot], t`` after each definition, ``ld.local.b32 t, [slot]`` and
  ``setp.ne.u32 p, t, 0`` before each use, each ``t`` a temporary live across two
  instructions, so that no general register holds the predicate between them.

With a :class:`~ptxalloc.spill.split.SplitPlan`, occurrences the plan groups into a *run* share
one temporary instead (live-range splitting, :mod:`split`): reloaded once before the run's first
use (or at the end of a loop's preheader), or the one the run's definition wrote. That
temporary is an ordinary register; spilled in a later round, it keeps the slot of the value it
was split from (its *home*): its reload is dropped, the store after its definition is the one
already there, and each of its uses reloads from the home slot. A run over a ``wgmma`` group's
in-flight window (:mod:`windows`) is reloaded before the group's fence and stored after its
wait, and its temporary is never spilled.

Stores and reloads address the function's ``.local`` spill array, or with ``--spill-to shared``
this thread's frame in the ``.shared`` spill area through the base register that the entry
sequence of :mod:`shared` computes (made the first time a value goes to memory); their
``origin`` is an
:class:`~ptxalloc.ir.edits.Edit` naming the value and the spilled register's
:class:`~ptxalloc.ir.edits.Slot`, and their offsets are filled in once every slot is known
(:mod:`slots`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import build
from ..ir.edits import Edit, EditKind, Slot, value_slot
from ..ir.instruction import Instruction, Removed
from ..ir.module import Function
from ..ir.operands import Reg
from ..ir.registers import RegClass
from ..records import field, record

if TYPE_CHECKING:     # splitting and shared-memory slots: imported when something spills
    from .split import SplitPlan


@record
class SpillState:
    """What spilling has done to a function so far, across rounds."""

    array: str                                            # the .local spill array's name
    origin_of: dict[int, int] = field(default_factory=dict)   # register -> original value
    no_spill: set[int] = field(default_factory=set)       # spill temporaries
    slot_size: dict[Slot, int] = field(default_factory=dict)      # slot -> bytes
    pred_home: dict[int, int] = field(default_factory=dict)       # predicate -> its GPR
    pred_slots: bool = False        # spilled predicates go to slots, not registers (above)
    pred_slotted: set[int] = field(default_factory=set)   # predicates spilled to slots
    predicates_recomputed: bool = False     # a round offered predicates recomputed from registers
    spilled_values: set[int] = field(default_factory=set)         # original values spilled
    rematerialized: set[int] = field(default_factory=set)
    shared: bool = False            # --spill-to shared: ``array`` is the .shared spill area
    one_dimensional: bool = False   # shared: the block is one-dimensional (spill.shared)
    base: int = -1                  # shared: the register holding this thread's frame address
    home: dict[int, Slot] = field(default_factory=dict)           # run temporary -> its slot

    def slot(self, v: int) -> Slot:
        """The slot register ``v`` spills to: its home if it was split from a spilled value."""
        return self.home.get(v) or value_slot(v)


def rewrite_spills(fn: Function, spill: set[int], remat: dict[int, Instruction],
                   state: SpillState, plan: SplitPlan | None = None) -> Function:
    """A copy of ``fn`` with every register of ``spill`` spilled (split into the runs of
    ``plan`` where one is given)."""
    out = fn.copy()
    regs = out.regs
    origin_of = state.origin_of
    classes = regs.classes
    home = state.home
    from . import shared
    from .split import SplitPlan
    plan = plan or SplitPlan()
    run_of = plan.run_of
    run_temp: dict[int, int] = {}
    for v in spill:
        state.spilled_values.add(origin_of.get(v, v))
        if v in remat:
            state.rematerialized.add(origin_of.get(v, v))
        elif classes[v] == RegClass.PRED and state.pred_slots:
            state.pred_slotted.add(v)
            state.slot_size[value_slot(v)] = 4          # a .b32 holding 0 or 1
        elif classes[v] == RegClass.PRED:
            b = regs.add(f"{regs.names[v]}$b", ".b32", RegClass.GPR32)
            origin_of[b] = origin_of.get(v, v)
            state.pred_home[v] = b
        elif v not in home:
            state.slot_size[value_slot(v)] = build.width_bytes(regs, v)
    entry = []
    if state.shared and state.base < 0 and state.slot_size:
        state.base, entry = shared.base_sequence(regs, state.array, state.one_dimensional)
        state.no_spill.update(range(state.base, len(regs)))

    def run_temporary(v: int, run: int) -> int:
        """The temporary of ``run`` (a run of register ``v``), made on first sight."""
        t = run_temp.get(run)
        if t is None:
            if run in plan.window_runs:     # in flight through its window: never spilled
                t = run_temp[run] = regs.like(v, f"{regs.names[v]}$w")
                state.no_spill.add(t)
            else:
                t = run_temp[run] = regs.like(v, f"{regs.names[v]}$r")
                home[t] = state.slot(v)
            origin_of[t] = origin_of.get(v, v)
        return t

    def loop_reloads(s: Instruction) -> list[Instruction]:
        got = []
        for v, run in plan.loop_reloads.get(id(s), ()):
            t = run_temporary(v, run)
            got.extend(_restore(regs, v, t, remat, state, s.line))
        return got

    def rewritten(s: Instruction) -> list:
        """What replaces instruction ``s`` (its loop reloads aside)."""
        o = s.origin
        if o is not None and o.slot is not None and (
                (o.loads and s.defs[0] in spill and home.get(s.defs[0]) == o.slot) or
                (o.stores and build.stored(s) in spill and home.get(build.stored(s)) == o.slot)):
            return []           # a spilled run temporary's reload, or the store after its def
        hit_uses = [u for u in s.uses if u in spill]
        hit_defs = [d for d in s.defs if d in spill]
        if not hit_uses and not hit_defs:
            return [s]
        if hit_defs and all(d in remat for d in hit_defs) and not hit_uses \
                and remat.get(hit_defs[0]) is s:
            return [Removed(s, "remat")]
        temp: dict[int, int] = {}
        reload = []
        for v in hit_uses + hit_defs:
            if v in temp:
                continue
            run = run_of.get((id(s), v))
            if run is not None:
                t = run_temporary(v, run)
                if (id(s), v) in plan.reload_at:
                    reload.append(v)
            else:
                t = regs.like(v, f"{regs.names[v]}$s")
                origin_of[t] = origin_of.get(v, v)
                state.no_spill.add(t)
                if v in hit_uses or s.guard >= 0 or v in s.uses:
                    reload.append(v)
            temp[v] = t
        line = s.line
        got = [ins for v in dict.fromkeys(reload)
               for ins in _restore(regs, v, temp[v], remat, state, line)]
        new_ops = [op.map_regs(lambda r: Reg(temp[r.v], r.comp) if r.v in temp else r)
                   for op in s.ops]
        guard = temp.get(s.guard, s.guard) if s.guard >= 0 else -1
        new = s.copy_with(new_ops, guard)
        if any(u in temp for u in s.implicit_uses):     # in flight: the window's temporary
            new.implicit_uses = tuple(temp.get(u, u) for u in s.implicit_uses)
            new.set_roles(new.roles)
        got.append(new)
        for v in dict.fromkeys(hit_defs):
            if (v not in remat                  # a rematerialized one is recomputed at uses
                    and run_of.get((id(s), v)) not in plan.window_runs):  # stored after the wait
                got.extend(_save(regs, v, temp[v], state, line))
        return got

    def window_stores(s: Instruction) -> list[Instruction]:
        return [ins for v, run in plan.stores_after.get(id(s), ())
                for ins in _save(regs, v, run_temporary(v, run), state, s.line)]

    body = []
    for s in out.body:
        if type(s) is not Instruction:
            body.append(s)
        elif id(s) in plan.after:               # the preheader's last instruction
            body.extend(rewritten(s))
            body.extend(window_stores(s))
            body.extend(loop_reloads(s))
        else:                                   # before the preheader's terminator, if any
            body.extend(loop_reloads(s))        # (or the fence opening a wgmma window)
            body.extend(rewritten(s))
            body.extend(window_stores(s))       # after the wait closing a wgmma window
    out.body = shared.insert_at_entry(body, entry) if entry else body
    return out


def _restore(regs, v: int, t: int, remat: dict[int, Instruction], state: SpillState,
             line: int) -> list[Instruction]:
    """What brings spilled ``v`` back into temporary ``t`` before a use."""
    value = state.origin_of.get(v, v)
    if v in remat:
        d = remat[v]
        ins = d.copy_with([Reg(t)] + d.ops[1:])
        ins.origin = Edit(EditKind.REMAT, value)
        ins.line = line
        return [ins]
    if v in state.pred_home:
        ins = build.pred_restore(regs, t, state.pred_home[v], line)
        ins.origin = Edit(EditKind.PRELOAD, value)
        return [ins]
    if v in state.pred_slotted:     # the slot into a short-lived register, then the predicate
        b = _slot_temporary(regs, v, state)
        load = build.spill_reload(regs, b, state.array, line, state.base)
        load.origin = Edit(EditKind.RELOAD, value, state.slot(v))
        ins = build.pred_restore(regs, t, b, line)
        ins.origin = Edit(EditKind.PRELOAD, value)
        return [load, ins]
    ins = build.spill_reload(regs, t, state.array, line, state.base)
    ins.origin = Edit(EditKind.RELOAD, value, state.slot(v))
    return [ins]


def _save(regs, v: int, t: int, state: SpillState, line: int) -> list[Instruction]:
    """What stores spilled ``v`` from temporary ``t`` after a definition."""
    value = state.origin_of.get(v, v)
    if v in state.pred_home:
        ins = build.pred_save(regs, state.pred_home[v], t, line)
        ins.origin = Edit(EditKind.PSPILL, value)
        return [ins]
    if v in state.pred_slotted:     # the predicate into a short-lived register, then the slot
        b = _slot_temporary(regs, v, state)
        ins = build.pred_save(regs, b, t, line)
        ins.origin = Edit(EditKind.PSPILL, value)
        store = build.spill_store(regs, b, state.array, line, state.base)
        store.origin = Edit(EditKind.SPILL, value, state.slot(v))
        return [ins, store]
    ins = build.spill_store(regs, t, state.array, line, state.base)
    ins.origin = Edit(EditKind.SPILL, value, state.slot(v))
    return [ins]


def _slot_temporary(regs, v: int, state: SpillState) -> int:
    """A fresh 32-bit temporary carrying predicate ``v`` between its slot and a predicate
    register; never spilled."""
    b = regs.add(f"{regs.names[v]}$t", ".b32", RegClass.GPR32)
    state.origin_of[b] = state.origin_of.get(v, v)
    state.no_spill.add(b)
    return b
