"""Results written into the registers of a register tuple's dying members (seed 000 "Register
Coalescing" applied to tensor fragments; SPEC 4.3; docs/decisions.md, "A tuple's registers
reused member by member").

A register tuple is one allocation unit (:mod:`ptxalloc.analysis.tuples`): its node interferes
with whatever any member interferes with, so its registers stay taken as a whole until its last
member dies. A ``wgmma`` accumulator read element by element after its ``wait_group`` — Triton's
softmax turns each of the 32 or 64 scores into a new value, ``fma.rn.f32 %r228, %r6, %r65,
%r227``, one instruction per member — then holds all of its registers while the new values
take as many again: up to twice the tuple's width live where the values alone need one width.
ptxas writes each result into the register of the member it reads for the last time (``FFMA
R24, R24, ...``).

The same effect here: an instruction that defines one register ``d`` and reads, for the last
time, a register ``s`` of the same shape is an *affinity* between ``d`` and ``s``. Where one end
is (or has joined) a tuple and the other is a scalar, the scalar is merged into the tuple on
the units of the member, exactly as conservative coalescing merges the scalar end of a copy
(:func:`ptxalloc.alloc.coalesce.merge_into_tuple`: the scalar may not interfere with any
register already placed on those units, and Briggs's or George's test must hold). Affinities
are taken in program order, repeatedly, so a chain — the score, its ``fma``, its ``ex2`` —
lands on one member's units. Nothing is rewritten: the allocation gives ``d`` the register
``s`` had, and the checker proves it like any other. Where the merges were made, the bound
compaction aims at is MaxLive counting a tuple's live members only (:func:`member_bound`).
The driver (:mod:`ptxalloc.alloc.driver`, knob ``TupleReuse``) merges after coalescing, for
the allocators that coalesce.
"""

from __future__ import annotations

from ..analysis import FunctionAnalysis
from ..analysis.pressure import Pressure
from .api import Problem
from .coalesce import COALESCE_FACTOR, merge_into_tuple

#: passes over the affinities: a chain runs forward, so one pass in program order takes most;
#: a second takes the affinities whose other end joined a tuple only later in the first pass
MAX_PASSES = 2


def affinities(analysis: FunctionAnalysis) -> list[tuple[int, int, int]]:
    """(instruction id, defined register, register read for the last time) for every
    instruction defining exactly one register that reads another of the same class and width
    that dies there, in program order; none in a function without register tuples."""
    if not analysis.tuples.groups:
        return []
    cfg, liveness = analysis.cfg, analysis.liveness
    regs = analysis.fn.regs
    classes, vec = regs.classes, regs.vec
    out = []
    for b in cfg.blocks:
        if not b.instrs:
            continue
        after = liveness.live_after(b.id)
        for i, ins in enumerate(b.instrs):
            if len(ins.defs) != 1 or ins.is_copy:
                continue
            d = ins.defs[0]
            live = after[i]
            for s in ins.uses:
                if s != d and not live >> s & 1 and classes[s] == classes[d] \
                        and vec[s] == vec[d]:
                    out.append((b.first + i, d, s))
    out.sort()
    return out


def reuse_tuple_units(p: Problem, found: list[tuple[int, int, int]],
                      factor: float = COALESCE_FACTOR) -> int:
    """Merge into register tuples the scalar ends of the affinities ``found`` (program order)
    where :func:`~ptxalloc.alloc.coalesce.merge_into_tuple` allows; returns the merges made."""
    merged = 0
    pending = found
    for _ in range(MAX_PASSES):
        still = []
        before = merged
        for aff in pending:
            _, d, s = aff
            if p.find(d) == p.find(s):
                continue
            if merge_into_tuple(p, d, s, factor):
                merged += 1
            else:
                still.append(aff)
        pending = still
        if merged == before:
            break
    return merged


def member_bound(analysis: FunctionAnalysis, uniform: int = 0) -> int:
    """MaxLive counting only the live members of register tuples (not a tuple's whole width
    while any member is live): the lower bound once values may take the registers of a
    tuple's dead members. Alignment is ignored, as in MaxLive; ``uniform`` as
    :func:`~ptxalloc.analysis.analyze_function` has it."""
    return Pressure(analysis.cfg, analysis.liveness, None, uniform).max_live
