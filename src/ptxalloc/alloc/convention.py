"""The calling convention's rules as the allocator applies them (seed 003; SPEC section 7;
:mod:`ptxalloc.target.abi` gives the registers).

* Arguments and results are bound to the convention's registers before allocation, through
  precolored registers and copies (the pre-pass :mod:`ptxalloc.passes.convention`).
* Spill costs (:func:`cost_factors`): a value bound to an argument register costs
  ``abi.ARG_FACTOR`` (x2.0) more to spill, a value live across a call ``abi.CALLEE_SAVED_FACTOR``
  (x1.5) more when callee-saved registers exist.
* Placement: values live across calls prefer the callee-saved registers
  (:func:`callee_saved_preference`), and compaction must not move more of them into caller-saved
  registers (:func:`caller_save_penalty`). R31, the frame pointer, is never allocated where the
  convention applies; a ``.func`` with a guarded ``ret`` is not given callee-saved registers at
  all, so that every epilogue is unconditional (:func:`callee_saved_reserved`).
* After allocation, every value live across a ``call`` in a caller-saved register (R0-R23 and
  R32 up, clipped to the budget) is saved around it, and a ``.func`` saves the callee-saved
  registers (R24-R30, clipped) it uses on entry and restores them before every ``ret``
  (:mod:`ptxalloc.spill.saves`).

Functions with neither calls nor a ``.func`` header (leaf kernels) are left alone
(:func:`applies`).
"""

from __future__ import annotations

import math
from typing import Callable

from ..analysis.calls import is_call
from ..ir.module import Function
from ..records import field, record
from ..target.abi import (ARG_FACTOR, CALLEE_SAVED, CALLEE_SAVED_FACTOR, FRAME_POINTER,
                          Convention)
from ..target.units import GPR
from ..util import bits


@record
class ConventionInfo:
    """What the convention found in one function and did to it: whether it applies
    (``active``), calls and tail calls, the precolored registers (register -> start unit) and
    the values moved to and from them, and, after allocation, the values live across calls,
    the callee-saved registers used and the bytes saved and restored."""

    active: bool = False
    leaf: bool = True
    calls: int = 0
    tail_calls: int = 0
    guarded_ret: bool = False
    precolored: dict[int, int] = field(default_factory=dict)     # register -> start unit
    bound_values: set[int] = field(default_factory=set)           # values moved to/from them
    values_across_calls: int = 0
    callee_saved_used: list[int] = field(default_factory=list)
    save_restore_bytes: int = 0

    def report(self) -> dict:
        """The report's ``convention`` field."""
        return {"leaf": self.leaf, "calls": self.calls, "tail_calls": self.tail_calls,
                "values_live_across_calls": self.values_across_calls,
                "callee_saved_used": [f"R{r}" for r in self.callee_saved_used],
                "save_restore_bytes": self.save_restore_bytes}

    def note(self, conv: Convention) -> str:
        """The ``-v`` line that describes the convention's work on the function."""
        cs = conv.callee_saved
        clip = ("" if len(cs) == len(CALLEE_SAVED) else
                f" (budget {conv.k}: {'no' if not len(cs) else f'only R{cs.start}-R{cs.stop - 1}'}"
                f" callee-saved registers; values live across calls are saved around them)")
        used = ", ".join(f"R{r}" for r in self.callee_saved_used) or "none"
        return (f"calling convention: {'leaf' if self.leaf else 'non-leaf'}, {self.calls} "
                f"call(s), {self.tail_calls} tail call(s), {self.values_across_calls} value(s) "
                f"live across calls, callee-saved used: {used}, {self.save_restore_bytes} bytes "
                f"saved and restored{clip}")


def applies(fn: Function) -> bool:
    """Whether the convention constrains ``fn`` at all: a ``.func``, or a kernel that calls."""
    return fn.kind == "func" or any(is_call(ins) for ins in fn.instructions())


def callee_saved_reserved(conv: Convention, info: ConventionInfo, fn: Function) -> int:
    """Units the allocator may not use: R31 (the frame pointer) wherever the convention
    applies, and the callee-saved registers of a ``.func`` whose ``ret`` is guarded."""
    mask = 0
    if info.active and conv.reserves_frame_pointer:
        mask |= 3 << (2 * FRAME_POINTER)
    if info.active and fn.kind == "func" and info.guarded_ret:
        mask |= conv.callee_saved_units()
    return mask


def cost_factors(analysis, conv: Convention, info: ConventionInfo) -> None:
    """Seed 003's spill-cost factors, in place on ``analysis.costs``: values bound to argument
    registers x``ARG_FACTOR``, values live across a call (which want a callee-saved register)
    x``CALLEE_SAVED_FACTOR`` when callee-saved registers exist (the 64-bit factor x1.2 is
    applied by the cost model itself)."""
    costs = analysis.costs
    for v in info.bound_values:
        if v < len(costs) and not math.isinf(costs[v]):
            costs[v] *= ARG_FACTOR
    if len(conv.callee_saved) and not info.leaf:
        for v in bits(analysis.across_calls):
            if not math.isinf(costs[v]):
                costs[v] *= CALLEE_SAVED_FACTOR


def callee_saved_preference(analysis, conv: Convention, info: ConventionInfo) -> dict[int, int]:
    """Values live across a call prefer the callee-saved registers (no save around calls):
    register -> the units it prefers."""
    if info.leaf or not len(conv.callee_saved):
        return {}
    mask = conv.callee_saved_units()
    return {v: mask for v in bits(analysis.across_calls)}


def caller_save_penalty(analysis, conv: Convention, problem,
                        info: ConventionInfo) -> Callable[[dict[int, int]], int] | None:
    """How many (call, value) pairs a coloring of ``problem`` (node -> start unit) would have to
    save around calls; compaction must not make it worse. None in a leaf function."""
    if info.leaf:
        return None
    across = list(analysis.live_across_calls.values())
    caller = conv.caller_saved_units()

    def penalty(start: dict[int, int]) -> int:
        """The (call, value) pairs in caller-saved registers under ``start``."""
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


def register_floor(analysis, conv: Convention, info: ConventionInfo, problem,
                   start: dict[int, int]) -> int:
    """The registers the convention itself makes an allocation use (0 in a leaf kernel), for
    an allocation: one past the highest argument or result register bound by the
    convention, and, where the allocation saves no value around a call (``start``, node ->
    start unit, puts every value live across a call in a callee-saved register), at each call R24
    (``conv.callee_saved.start``) plus the registers of the values live across it, which
    must all sit in R24 up at once. MaxLive does not see either: saxpy_poly keeps 4
    registers live across its call (28 registers, MaxLive 8)."""
    if not info.active:
        return 0
    units = analysis.pressure.units
    floor = 0
    for v, s in info.precolored.items():
        floor = max(floor, (s + units[v] + 1) // 2)
    penalty = caller_save_penalty(analysis, conv, problem, info)
    if penalty is None or not len(conv.callee_saved) or penalty(start):
        return floor
    for live in analysis.live_across_calls.values():
        across = sum(units[v] for v in bits(live)
                     if problem.shape[problem.find(v)].file == GPR)
        if across:
            floor = max(floor, conv.callee_saved.start + (across + 1) // 2)
    return floor
