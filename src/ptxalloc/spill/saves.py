"""Saves around calls and the callee-saved prologue and epilogues, inserted once registers are
known (seed 003 "Caller-saved registers", "Callee-saved registers"; SPEC section 7).

* :func:`insert_call_saves`: every value live across a ``call`` whose register is caller-saved
  (R0-R23 and R32 up, clipped to the budget) is stored before the call and reloaded after it;
  one slot per value, so that a save no call changed in between is redundant
  (:mod:`lazy` removes it).
* :func:`insert_callee_saves`: a ``.func`` that uses a callee-saved register (R24-R30,
  clipped) stores it on entry and reloads it before every ``ret``.

The stores and reloads address the spill array like spill code (:mod:`rewrite`) and get their
offsets with it (:mod:`slots`); the report counts them as the convention's traffic.
"""

from __future__ import annotations

from ..ir import build
from ..ir.cfg import CFG
from ..ir.edits import Edit, EditKind, callee_slot, save_slot
from ..ir.instruction import Instruction
from ..ir.module import Function
from ..ir.registers import RegClass
from ..target.units import Shape
from ..util import bits
from .rewrite import SpillState


def insert_call_saves(fn: Function, cfg: CFG, live_across: dict[int, int],
                      start: dict[int, int], shapes: dict[int, Shape], caller_units: int,
                      state: SpillState) -> tuple[int, int]:
    """Store before every call of ``cfg`` (``live_across``: per call, by its index in
    ``cfg.instrs``, the registers live across it), and reload after it, each value placed
    (``start``, ``shapes``) on a unit of ``caller_units``. Returns how many values are live
    across some call and the bytes saved and restored."""
    regs = fn.regs
    saves: dict[int, list[int]] = {}
    seen_values: set[int] = set()
    for iid, live in live_across.items():
        vs = []
        for v in bits(live):
            if v not in start or regs.classes[v] == RegClass.PRED:
                continue
            seen_values.add(v)
            if shapes[v].mask(start[v]) & caller_units:
                vs.append(v)
        if vs:
            saves[id(cfg.instrs[iid])] = vs
    if not saves:
        return len(seen_values), 0
    moved = 0
    body = []
    for s in fn.body:
        vs = saves.get(id(s)) if type(s) is Instruction else None
        if not vs:
            body.append(s)
            continue
        post = []
        for v in vs:
            slot = save_slot(v)     # one slot per value: a save no call changed is redundant
            state.slot_size[slot] = build.width_bytes(regs, v)
            value = state.origin_of.get(v, v)
            st = build.spill_store(regs, v, state.array, s.line)
            st.origin = Edit(EditKind.SAVE, value, slot)
            ld = build.spill_reload(regs, v, state.array, s.line)
            ld.origin = Edit(EditKind.RESTORE, value, slot)
            body.append(st)
            post.append(ld)
            moved += 2 * build.width_bytes(regs, v)
        body.append(s)
        body.extend(post)
    fn.body = body
    return len(seen_values), moved


def insert_callee_saves(fn: Function, used: list[int], state: SpillState,
                        names_for: dict[int, int]) -> int:
    """Prologue and epilogues of a ``.func`` for the callee-saved registers ``used`` (register
    numbers); a kernel has no caller whose registers it must keep and is left alone.
    ``names_for`` receives, for each saved register, the id of a new 32-bit register table
    entry standing for it and its start unit. Returns the bytes saved and restored."""
    if not used or fn.kind != "func":
        return 0
    regs = fn.regs
    moved = 0
    prologue = []
    epilogue_for = []
    for r in used:
        v = regs.add(f"%R{r}$callee", ".b32", RegClass.GPR32)
        names_for[v] = 2 * r
        slot = callee_slot(r)
        state.slot_size[slot] = 4
        st = build.spill_store(regs, v, state.array)
        st.origin = Edit(EditKind.CSAVE, slot=slot, register=r)
        prologue.append(st)
        epilogue_for.append((v, Edit(EditKind.CRESTORE, slot=slot, register=r)))
        moved += 4
    body = []
    placed = False
    for s in fn.body:
        if type(s) is Instruction and not placed:
            body.extend(prologue)
            placed = True
        if type(s) is Instruction and s.base == "ret":
            for v, restore in epilogue_for:
                ld = build.spill_reload(regs, v, state.array, s.line)
                ld.origin = restore
                body.append(ld)
                moved += 4
        body.append(s)
    if not placed:
        body[0:0] = prologue
    fn.body = body
    return moved
