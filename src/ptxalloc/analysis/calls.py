"""Values live across calls (seed 003 "Caller-saved registers"; SPEC section 7).

A value live after a ``call`` and not defined by it must survive the call: in a callee-saved
register, or saved and restored around it. The calling convention's cost factors and register
preferences (:mod:`ptxalloc.alloc.convention`) and the saves around calls
(:mod:`ptxalloc.spill.saves`) read it; :class:`~ptxalloc.analysis.FunctionAnalysis` computes it
once per round (``live_across_calls``).
"""

from __future__ import annotations

from ..ir.cfg import CFG
from ..ir.instruction import Instruction
from .liveness import Liveness


def is_call(ins: Instruction) -> bool:
    """Whether ``ins`` is a ``call`` (any form: direct, indirect, old ABI)."""
    return ins.base == "call"


def live_across_calls(cfg: CFG, liveness: Liveness) -> dict[int, int]:
    """For each call (by its index in ``cfg.instrs``) the bitset of registers live across it."""
    out: dict[int, int] = {}
    for b in cfg.blocks:
        if not any(is_call(ins) for ins in b.instrs):
            continue
        after = liveness.live_after(b.id)
        for k, ins in enumerate(b.instrs):
            if is_call(ins):
                live = after[k]
                for d in ins.defs:
                    live &= ~(1 << d)
                out[b.first + k] = live
    return out
