"""Loop-invariant code motion before allocation: ptxas's optional HoistInvariants pre-pass
(seed 004 "Pipeline Position", ``sub_8FFDE0``; issue 17).

Loops are taken innermost first (natural loops of :mod:`ptxalloc.ir.cfg`), so that an
instruction hoisted out of an inner loop may leave its outer loop too. A loop is treated only
when it has a *preheader*: a block outside the loop that is the only predecessor of the header
from outside and whose only successor is the header. Loops without one are skipped and counted
(creating a preheader would mean a new label and retargeted branches; the pass never edits the
control flow). An instruction of the loop is hoisted when

* it is speculatable (:func:`ptxalloc.ir.effects.speculatable`: pure, unguarded, outside the
  carry chain, not a warp-synchronous ``.aligned`` matrix instruction), so executing it where
  the original did not has no effect but the register it writes;
* each register it reads is defined nowhere in the loop, or only by an instruction hoisted
  before it: its value is the one flowing out of the preheader;
* no register it reads or writes is one an asynchronous instruction of the function keeps
  accessing after it issues (:func:`ptxalloc.ir.isa.async_operands`: a ``wgmma.mma_async``
  accumulator or A fragment, a ``tcgen05.ld``/``st`` vector): above the loop's wait that
  retires it, the instruction would touch the register in flight (undefined);
* each register it writes is a whole scalar register with this one definition in the function
  (no parameter register) and is not live into the loop's header: every use in the loop is
  reached by this definition within the same trip, and a use after the loop that the original
  reached with no definition (an undefined value) now reads a defined one — a refinement.

Two kinds of invariant are left in place, as not worth a register across the loop: one that
reads no register (a constant, a symbol's address, a fixed special register: the allocator
rematerializes those for free) and a whole-register copy (it would only keep a second name of
an invariant value live). On the corpus they were nine in ten of the invariants, and hoisting
them doubled the sum of MaxLive (docs/decisions.md). The validator accepts them all the same:
this is policy, not correctness.

Hoisted instructions go, in the order found, to the end of the preheader (before its branch
when it ends in one; a preheader whose branch reads a hoisted register, or with no
instruction to anchor to, is skipped). The result records, per loop, the anchor instruction and
the moved ones (original indices), which the output writes as ``//@hoist`` lines
(docs/allocated-ptx.md); :mod:`ptxalloc.verify.hoist` re-checks every condition above
independently. Switch: the knob ``hoist`` (``--knob hoist=1``; ``hoist=2`` treats innermost
loops only, like ptxas's "inner loops" policy of its knob 381).

Hoisting lengthens live ranges across the whole loop, so it can raise MaxLive; docs/decisions.md
("Loop-invariant hoisting") gives the measured effect and why the knob is off by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.liveness import Liveness
from ..ir import isa
from ..ir.cfg import CFG, Loop
from ..ir.effects import speculatable
from ..ir.instruction import DEF, Instruction
from ..ir.module import Function
from ..ir.operands import Reg
from ..util import gc_paused

BEFORE, AFTER = "<", ">"


@dataclass
class Hoisted:
    """A function with loop invariants hoisted: ``groups`` lists, per treated loop, the anchor
    (original instruction index), ``BEFORE``/``AFTER`` it, and the original indices of the
    instructions moved there in order; ``without_preheader`` counts the loops skipped."""

    function: Function
    groups: list[tuple[int, str, list[int]]] = field(default_factory=list)
    without_preheader: int = 0

    @property
    def moved(self) -> int:
        return sum(len(g[2]) for g in self.groups)

    def report(self) -> dict:
        return {"hoisted": self.moved, "loops": len(self.groups),
                "loops_without_preheader": self.without_preheader}


def preheader(cfg: CFG, loop: Loop) -> int:
    """The loop's preheader block (module docstring), or -1."""
    outside = [p for p in cfg.blocks[loop.header].preds if p not in loop.blocks]
    if len(outside) != 1:
        return -1
    p = outside[0]
    return p if cfg.blocks[p].succs == [loop.header] and cfg.blocks[p].reachable else -1


def _whole_scalar_defs(ins: Instruction, fn: Function) -> bool:
    """Every register ``ins`` writes is written whole and is a scalar register."""
    for op, role in zip(ins.ops, ins.roles):
        if role & DEF:
            if type(op) is not Reg or op.comp or fn.regs.vec[op.v]:
                return False
    return bool(ins.defs)


def worth_hoisting(ins: Instruction) -> bool:
    """The pass's policy (module docstring): the instruction reads a register and is not a
    plain copy."""
    return bool(ins.uses) and not ins.is_copy


def asynchronous_registers(fn: Function) -> set[int]:
    """The registers some asynchronous instruction of ``fn`` keeps accessing after it issues
    (module docstring)."""
    out: set[int] = set()
    for ins in fn.instructions():
        got = isa.async_operands(ins)
        if got is not None:
            out.update(got[0])
    return out


def definition_counts(fn: Function) -> list[int]:
    """How many times each register is defined in ``fn`` (a parameter register's entry value
    counts as one)."""
    count = [0] * len(fn.regs)
    for ins in fn.instructions():
        for d in ins.defs:
            count[d] += 1
    for p in fn.params + fn.returns:
        if p.vid >= 0:
            count[p.vid] += 1
    return count


def hoist_function(fn: Function, innermost_only: bool = False) -> Hoisted | None:
    """The function with the invariants of every loop that has a preheader hoisted to it (of
    the innermost loops alone with ``innermost_only``: ptxas's "inner loops" policy, knob
    ``hoist=2``), or None when nothing moves."""
    with gc_paused():
        index = {id(ins): k for k, ins in enumerate(fn.instructions())}
        ndefs = definition_counts(fn)
        in_flight = asynchronous_registers(fn)
        cur = fn.copy()
        cfg = CFG(cur)
        if not cfg.loops:
            return None
        # a loop is known by its header's label: moving instructions can empty an unlabelled
        # block, which renumbers the blocks after it
        parents = {lp.parent for lp in cfg.loops}
        headers = [cfg.blocks[lp.header].labels[0]
                   for lp in sorted(cfg.loops, key=lambda lp: -lp.depth)
                   if not (innermost_only and lp.id in parents)]
        result = Hoisted(cur)
        stale = False
        for label in headers:
            if stale:
                cfg = CFG(cur)
                stale = False
            loop = next(lp for lp in cfg.loops if label in cfg.blocks[lp.header].labels)
            p = preheader(cfg, loop)
            if p < 0 or not cfg.blocks[p].instrs:
                result.without_preheader += 1
                continue
            anchor = cfg.blocks[p].instrs[-1]
            side = BEFORE if anchor.base == "bra" else AFTER
            if side == AFTER and anchor.base in ("brx", "ret", "exit", "trap"):
                continue            # a guarded exit ends the preheader: nothing goes after it
            moved = _invariants(cur, cfg, loop, ndefs, in_flight)
            if not moved:
                continue
            if side == BEFORE and any(d in anchor.uses for ins in moved for d in ins.defs):
                continue
            _move(cur, anchor, side, moved)
            result.groups.append((index[id(anchor)], side, [index[id(i)] for i in moved]))
            stale = True
        return result if result.groups else None


def _invariants(fn: Function, cfg: CFG, loop: Loop, ndefs: list[int],
                in_flight: set[int]) -> list[Instruction]:
    """The loop's hoistable instructions, each after those whose registers it reads."""
    live_in_header = Liveness(cfg).live_in[loop.header]
    body = [ins for b in sorted(loop.blocks) for ins in cfg.blocks[b].instrs]
    defined = 0
    for ins in body:
        for d in ins.defs:
            defined |= 1 << d
    moved: list[Instruction] = []
    taken: set[int] = set()
    changed = True
    while changed:
        changed = False
        for ins in body:
            if id(ins) in taken or not worth_hoisting(ins) or not speculatable(ins) \
                    or not _whole_scalar_defs(ins, fn):
                continue
            if any(ndefs[d] != 1 or live_in_header >> d & 1 for d in ins.defs):
                continue
            if any(defined >> u & 1 for u in ins.uses):
                continue
            if in_flight and any(r in in_flight for r in ins.uses + ins.defs):
                continue
            moved.append(ins)
            taken.add(id(ins))
            for d in ins.defs:
                defined &= ~(1 << d)
            changed = True
    return moved


def _move(fn: Function, anchor: Instruction, side: str, moved: list[Instruction]) -> None:
    """Move ``moved`` (in order) right before or after ``anchor`` in ``fn``'s body."""
    gone = {id(i) for i in moved}
    body = [s for s in fn.body if id(s) not in gone]
    at = next(k for k, s in enumerate(body) if s is anchor)
    if side == AFTER:
        at += 1
    body[at:at] = moved
    fn.body = body
