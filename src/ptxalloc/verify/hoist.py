"""Translation validation of loop-invariant hoisting (issue 17; seed 004 HoistInvariants): the
hoisted function is the original with some instructions moved, loop by loop, to the end of the
loop's preheader, and each move is one that cannot be observed. The checker proves a hoisted
allocation (``hoist=1`` in its header) in two steps: this module replays the ``//@hoist`` lines
on the original, checking every condition below on the function as it stands before each line,
then the allocation is proven against the result (docs/checker.md, "Hoisted and promoted
allocations").

A line ``//@hoist K< J1 J2 ..`` (or ``K>``) moves original instructions J1, J2 .. in that order
to right before (after) original instruction K. It is accepted when

* K is the last instruction of a reachable block P whose only successor is the header of a
  natural loop L, P is outside L and the header's only predecessor outside L (a preheader),
  and the side is ``<`` exactly when K is a ``bra`` (not a ``brx``), which then reads none of
  the registers the Ji write;
* every Ji is in L, listed once, and speculatable (:func:`ptxalloc.ir.effects.speculatable`,
  a fact of the instruction set like the ISA table);
* every register a Ji writes is a whole scalar register, defined by Ji alone in the function
  (parameter registers count as defined at entry) and not live at L's header (this module's own
  liveness);
* every register a Ji reads is defined nowhere in L except by some Jh listed before it;
* no register a Ji reads or writes is one an asynchronous instruction of the function keeps
  accessing after it issues (:func:`ptxalloc.ir.isa.async_operands`, a fact of the instruction
  set): moved above a wait in L, Ji would touch it in flight.

Then Ji computes in the preheader the value it computed in every trip of the original loop,
every use in L that it reached is still reached by it alone, and nothing else can tell (see
:mod:`ptxalloc.passes.hoist` for the argument). Only the CFG and effect kinds of the IR are
shared with the pass; the liveness and the conditions are recomputed here.
"""

from __future__ import annotations

import re

from ..errors import VerificationError
from ..ir import isa
from ..ir.cfg import CFG, Loop
from ..ir.effects import speculatable
from ..ir.instruction import COMMENT, DEF, Instruction, Raw
from ..ir.module import Function
from ..ir.operands import Reg
from .header import HOIST

_LINE = re.compile(r"//@hoist\s+(\d+)([<>])((?:\s+\d+)+)\s*$")


def read_hoists(allocated: Function, n: int) -> list[tuple[int, str, list[int]]]:
    """The moves the ``//@hoist`` lines of an allocated function record, in order:
    (anchor, side, moved instruction indices of the original's ``n``)."""
    out = []
    for s in allocated.body:
        if type(s) is Raw and s.kind == COMMENT and s.text.startswith(HOIST):
            m = _LINE.match(s.text)
            if m is None:
                raise VerificationError(f"function '{allocated.name}', line {s.line}: malformed "
                                        f"hoist line '{s.text}'")
            anchor = int(m.group(1))
            moved = [int(t) for t in m.group(3).split()]
            for k in [anchor] + moved:
                if k >= n:
                    raise VerificationError(f"function '{allocated.name}', line {s.line}: "
                                            f"instruction {k} is outside the original's {n}")
            out.append((anchor, m.group(2), moved))
    return out


def live_in_blocks(cfg: CFG) -> list[int]:
    """Registers live on entry to each block (bitsets): a backward fixpoint; a guarded
    definition does not kill."""
    blocks = cfg.blocks
    gen = []
    kill = []
    for b in blocks:
        g = k = 0
        for ins in b.instrs:
            for u in ins.uses:
                if not k >> u & 1:
                    g |= 1 << u
            if ins.guard < 0:
                for d in ins.defs:
                    k |= 1 << d
        gen.append(g)
        kill.append(k)
    live = [0] * len(blocks)
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            out = 0
            for s in b.succs:
                out |= live[s]
            new = gen[b.id] | (out & ~kill[b.id])
            if new != live[b.id]:
                live[b.id] = new
                changed = True
    return live


def loop_entered_at(cfg: CFG, k: int, side: str, fail) -> Loop:
    """The natural loop whose preheader instruction ``k`` of ``cfg`` ends, code going ``side``
    of it (``<`` exactly when it is a ``bra``); raises ``fail(why)`` otherwise (module
    docstring, first condition)."""
    anchor = cfg.instrs[k]
    p = cfg.block_of[k]
    block = cfg.blocks[p]
    if block.instrs[-1] is not anchor:
        raise fail(f"the anchor (line {anchor.line}) is not the last instruction of its block")
    if not block.reachable or len(block.succs) != 1:
        raise fail(f"the block of line {anchor.line} does not lead to one loop header alone")
    loop = next((lp for lp in cfg.loops if lp.header == block.succs[0]), None)
    if loop is None or p in loop.blocks:
        raise fail(f"the block of line {anchor.line} is not before a loop header")
    if [q for q in cfg.blocks[loop.header].preds if q not in loop.blocks] != [p]:
        raise fail(f"the block of line {anchor.line} is not the loop's only way in")
    if anchor.base == "brx" or (side == "<") != (anchor.base == "bra"):
        raise fail("instructions must go before the block's branch and after anything else")
    return loop


def _check_line(fn: Function, originals: list[Instruction], anchor_k: int, side: str,
                moved_k: list[int]) -> None:
    name = fn.name
    names = fn.regs.names

    def fail(why: str) -> VerificationError:
        return VerificationError(f"function '{name}': hoist line '{anchor_k}{side} "
                                 f"{' '.join(map(str, moved_k))}' refused: {why}")

    cfg = CFG(fn)
    where = {id(ins): k for k, ins in enumerate(cfg.instrs)}
    anchor = originals[anchor_k]
    if id(anchor) not in where:
        raise fail("the anchor is not an instruction of the function")
    loop = loop_entered_at(cfg, where[id(anchor)], side, fail)
    if len(set(moved_k)) != len(moved_k) or anchor_k in moved_k:
        raise fail("an instruction is listed twice")
    moved = [originals[k] for k in moved_k]
    for k, ins in zip(moved_k, moved):
        if id(ins) not in where or cfg.block_of[where[id(ins)]] not in loop.blocks:
            raise fail(f"instruction {k} (line {ins.line}) is not in the loop")
    defs_count = [0] * len(fn.regs)
    for ins in cfg.instrs:
        for d in ins.defs:
            defs_count[d] += 1
    for prm in fn.params + fn.returns:
        if prm.vid >= 0:
            defs_count[prm.vid] += 1
    live_header = live_in_blocks(cfg)[loop.header]
    in_flight: set[int] = set()
    for ins in cfg.instrs:
        got = isa.async_operands(ins)
        if got is not None:
            in_flight.update(got[0])
    in_loop = [ins for b in loop.blocks for ins in cfg.blocks[b].instrs]
    defined_in_loop = 0
    for ins in in_loop:
        for d in ins.defs:
            defined_in_loop |= 1 << d
    placed = set()
    for k, ins in zip(moved_k, moved):
        text = f"line {ins.line} '{ins.render(names.__getitem__)}'"
        if not speculatable(ins):
            raise fail(f"{text} is not speculatable (guarded, memory, control, carry, "
                       f"warp-synchronous or unknown)")
        for op, role in zip(ins.ops, ins.roles):
            if role & DEF and (type(op) is not Reg or op.comp or fn.regs.vec[op.v]):
                raise fail(f"{text} writes part of a register or a vector")
        if not ins.defs:
            raise fail(f"{text} writes no register")
        for d in ins.defs:
            if defs_count[d] != 1:
                raise fail(f"{text}: {names[d]} has {defs_count[d]} definitions")
            if live_header >> d & 1:
                raise fail(f"{text}: {names[d]} is live into the loop header")
            if side == "<" and d in anchor.uses:
                raise fail(f"{text}: the preheader's branch reads {names[d]}")
        for r in ins.uses + ins.defs:
            if r in in_flight:
                raise fail(f"{text}: an asynchronous instruction keeps accessing {names[r]} "
                           f"after it issues; moved, the read could see it in flight")
        for u in ins.uses:
            if defined_in_loop >> u & 1 and u not in placed:
                raise fail(f"{text} reads {names[u]}, which the loop defines (loop-variant)")
        placed.update(ins.defs)


def hoisted_original(original: Function, allocated: Function) -> Function:
    """The original with the ``//@hoist`` lines of ``allocated`` applied, each checked first
    (module docstring): what the allocation (or the next pre-pass) is proven against."""
    originals = original.instructions()
    cur = original.copy()
    for anchor_k, side, moved_k in read_hoists(allocated, len(originals)):
        _check_line(cur, originals, anchor_k, side, moved_k)
        gone = {id(originals[k]) for k in moved_k}
        body = [s for s in cur.body if id(s) not in gone]
        at = next(i for i, s in enumerate(body) if s is originals[anchor_k])
        at += side == ">"
        body[at:at] = [originals[k] for k in moved_k]
        cur.body = body
    return cur
