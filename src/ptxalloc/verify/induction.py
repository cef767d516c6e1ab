"""Translation validation of loop-carried pointer families rewritten as one induction variable
(issue 13; :mod:`ptxalloc.passes.induction`): the rewritten function computes what the original
computes. The checker proves such an allocation (``induction=1`` in its header) in two steps:
this module checks the ``//@induction`` lines against the original and rebuilds the rewritten
function from them (:func:`ptxalloc.ir.induction.apply_families`, mechanical), then the next
pre-pass's record, or the allocation, is proven against the result (docs/checker.md,
"Induction-variable allocations").

A record ``A> U1,..,Un D1,..,Dn R1,..,Rm`` (``A<`` likewise) is accepted when, with ``%p_i``
the register Ui writes:

* A ends the preheader P of a natural loop L, ``<`` exactly when A is a ``bra``
  (:func:`ptxalloc.verify.hoist.loop_entered_at`, the hoist validator's rule);
* every Ui is ``add.s64 %p_i, %p_i, S``, unguarded, one stride S for all (the same register or
  immediate); the ``%p_i`` are distinct whole scalar 64-bit registers, members of no other
  record, no parameter or result of the function, and none of them is S; all Ui lie in one block
  of L, and no instruction between U1 and Un other than the Ui reads or writes a member;
* every Di is ``add.s64 %p_i, B, O_i`` with one base B shared by all (the record's rule:
  :func:`ptxalloc.ir.induction.base_and_offsets`), and its expression is *available* at the end
  of P: on every path from the entry to there, Di executed and none of ``%p_i``, B, O_i was
  written since (this module's own forward must-dataflow; A itself included);
* inside L nothing but Ui writes ``%p_i``, and nothing writes S (when a register) or any O_i
  (when a register);
* the instructions of L other than the Ui that read a member are exactly R1..Rm;
* no member is live into a block outside L that a block of L branches or falls to (this
  module's liveness, :func:`ptxalloc.verify.hoist.live_in_blocks`);
* no member or offset is a register an asynchronous instruction keeps accessing after it issues
  (:func:`ptxalloc.ir.isa.async_operands`): a fresh ``%t`` read in its place could be reused
  while the access is in flight;
* two records' loops are the same loop or share no block;
* no record's base B or register offset O_i is a member of any record (its own included): G
  stops advancing members and may leave their entry definitions out, so a read of a member that
  G adds (the counter's start, ``%q + O_i``) would not see F's value.

Why the rewritten function G computes what the original F computes: G is F with, per record, a
fresh ``%q`` set to B at the end of P, ``add.s64 %q, %q, S`` right before U1, the Ui left out,
``add.s64 %t, %q, O_i`` right before each Rj reading ``%p_i`` and read there instead, and an
entry definition nothing reads any more left out. Claim: at every point of L outside the run
U1..Un, F's ``%p_i`` equals G's ``%q + O_i`` (mod 2^64), and every other register G reads holds
what it holds in F. L is entered only from P (its header dominates it) and along its back
edges. At the end of P, ``%p_i = B + O_i`` in F (availability) and ``%q = B`` in G. Inside L,
O_i and S never change (nothing writes them) and ``%q`` changes only before U1; F's ``%p_i``
only at Ui, each once, by the same S: after the run both sides have advanced by S, and between
U1 and Un nothing reads a member. A read Rj then gets ``%t = %q + O_i``, which is F's ``%p_i``.
Every other instruction is the same in both, reading equal values. Leaving L, no member is
live, so F's members never again read their in-loop values, and re-entering L passes P again.
An entry definition left out defines a member G never reads.
"""

from __future__ import annotations

from ..errors import VerificationError
from ..ir import isa
from ..ir.cfg import CFG
from ..ir.induction import (INDUCTION, Family, advance_parts, apply_families,
                            base_and_offsets, entry_parts, parse_line, same_operand)
from ..ir.instruction import COMMENT, Raw
from ..ir.module import Function
from ..ir.operands import Reg
from ..ir.registers import RegClass
from .hoist import live_in_blocks, loop_entered_at


def read_families(allocated: Function) -> list[Family]:
    """The records of an allocated function's ``//@induction`` lines; raises VerificationError
    on a malformed one."""
    out = []
    for s in allocated.body:
        if type(s) is Raw and s.kind == COMMENT and s.text.startswith(INDUCTION + " "):
            try:
                out.append(parse_line(s.text[len(INDUCTION):]))
            except ValueError as e:
                raise VerificationError(f"function '{allocated.name}', line {s.line}: "
                                        f"{e}") from None
    return out


def induced_original(original: Function, allocated: Function) -> Function:
    """The original rewritten as the allocated function's ``//@induction`` lines say, once every
    record is checked (module docstring): what the next pre-pass or the allocation is proven
    against."""
    families = read_families(allocated)
    check_families(original, families)
    try:
        return apply_families(original, families)
    except ValueError as e:
        raise VerificationError(f"function '{original.name}': {e}") from None


def check_families(fn: Function, families: list[Family]) -> None:
    """Raise VerificationError unless every record holds on ``fn`` (module docstring)."""
    name = fn.name
    regs = fn.regs
    cfg = CFG(fn)
    instrs = cfg.instrs
    n = len(instrs)
    live_in = live_in_blocks(cfg)
    bound = {p.vid for p in fn.params + fn.returns if p.vid >= 0}
    in_flight: set[int] = set()
    for ins in instrs:
        got = isa.async_operands(ins)
        if got is not None:
            in_flight.update(got[0])
    seen_members: set[int] = set()
    every_member: set[int] = set()
    for f in families:
        for k in f.advances:
            parts = advance_parts(instrs[k]) if 0 <= k < n else None
            if parts is not None:
                every_member.add(parts[0])
    loops = []
    for f in families:
        def fail(why: str, f=f) -> VerificationError:
            return VerificationError(f"function '{name}': induction record '{f.line()}' "
                                     f"refused: {why}")

        if any(not 0 <= k < n for k in (f.anchor, *f.advances, *f.entries, *f.reads)):
            raise fail(f"an instruction index is outside the original's {n}")
        if len(f.entries) != len(f.advances) or not f.advances \
                or list(f.advances) != sorted(set(f.advances)) \
                or list(f.reads) != sorted(set(f.reads)):
            raise fail("the lists are not ascending, or not one entry per advance")
        loop = loop_entered_at(cfg, f.anchor, f.side, fail)
        for other in loops:
            if other is not loop and other.blocks & loop.blocks:
                raise fail("its loop overlaps another record's loop")
        loops.append(loop)
        body = {cfg.blocks[b].first + k for b in loop.blocks
                for k in range(len(cfg.blocks[b].instrs))}
        # the advances
        members: list[int] = []
        stride = None
        for k in f.advances:
            parts = advance_parts(instrs[k])
            if parts is None:
                raise fail(f"line {instrs[k].line} is not 'add.s64 %p, %p, S'")
            p, s = parts
            if stride is None:
                stride = s
            elif not same_operand(stride, s):
                raise fail(f"line {instrs[k].line} advances by another stride")
            if k not in body:
                raise fail(f"line {instrs[k].line} is not in the loop")
            if regs.classes[p] != RegClass.GPR64 or regs.vec[p] or p in bound \
                    or p in seen_members or p in members:
                raise fail(f"{regs.names[p]} is not a distinct whole 64-bit register of the "
                           f"function's own")
            members.append(p)
        family = set(members)
        seen_members |= family
        if type(stride) is Reg and stride.v in family:
            raise fail("the stride is a member")
        block = cfg.block_of[f.advances[0]]
        if any(cfg.block_of[k] != block for k in f.advances):
            raise fail("the advances are not in one block")
        advances = set(f.advances)
        for k in range(f.advances[0] + 1, f.advances[-1]):
            if k not in advances and any(r in family for r in instrs[k].uses + instrs[k].defs):
                raise fail(f"line {instrs[k].line}, between the advances, reads or writes a "
                           f"member")
        # the entries
        entries = [instrs[k] for k in f.entries]
        if [(entry_parts(e) or (None,))[0] for e in entries] != members:
            raise fail("an entry is not 'add.s64 %p, B, O' of its advance's member")
        shared = base_and_offsets(entries)
        if shared is None:
            raise fail("the entries share no base")
        offsets = [o for o in shared[1] if type(o) is Reg]
        for x in (shared[0], *offsets):
            if type(x) is Reg and x.v in every_member:
                raise fail(f"its base or an offset, {regs.names[x.v]}, is a member of a "
                           f"family: the rewrite stops advancing it")
        # inside the loop
        invariant = {o.v for o in offsets} | ({stride.v} if type(stride) is Reg else set())
        reads = set()
        for k in body:
            ins = instrs[k]
            if k not in advances:
                if any(d in family for d in ins.defs):
                    raise fail(f"line {ins.line} writes a member in the loop")
                if any(u in family for u in ins.uses):
                    reads.add(k)
            if any(d in invariant for d in ins.defs):
                raise fail(f"line {ins.line} writes the stride or an offset in the loop")
        if reads != set(f.reads):
            missing = sorted(reads - set(f.reads)) or sorted(set(f.reads) - reads)
            raise fail(f"the reads of members in the loop are not the record's (line "
                       f"{instrs[missing[0]].line})")
        for b in loop.blocks:
            for s in cfg.blocks[b].succs:
                if s not in loop.blocks and any(live_in[s] >> p & 1 for p in family):
                    raise fail(f"a member is live out of the loop (into block of line "
                               f"{cfg.blocks[s].instrs[0].line if cfg.blocks[s].instrs else '?'})")
        if any(r in in_flight for r in family | {o.v for o in offsets}):
            raise fail("an asynchronous instruction keeps accessing a member or an offset")
        p_block = cfg.block_of[f.anchor]
        missing = _unavailable(cfg, f.entries, p_block)
        if missing is not None:
            raise fail(f"the entry on line {instrs[missing].line} does not hold at the end of "
                       f"the preheader on every path")


def _unavailable(cfg: CFG, entries: tuple[int, ...], block: int) -> int | None:
    """The first of the ``entries`` (instruction indices of ``add %p, a, b``) whose expression
    is not available at the end of ``block``: a forward must-dataflow, the expression made at
    its instruction and ended by any write of ``%p``, a or b; nothing holds at the entry."""
    instrs = cfg.instrs
    kills: dict[int, int] = {}
    gen_at: dict[int, int] = {}
    for bit, k in enumerate(entries):
        for r in instrs[k].defs + instrs[k].uses:
            kills[r] = kills.get(r, 0) | 1 << bit
        gen_at[k] = bit
    universe = (1 << len(entries)) - 1
    blocks = cfg.blocks

    def transfer(b, avail: int) -> int:
        for j, ins in enumerate(b.instrs):
            for d in ins.defs:
                avail &= ~kills.get(d, 0)
            bit = gen_at.get(b.first + j)
            if bit is not None:
                avail |= 1 << bit
        return avail

    out = [universe] * len(blocks)
    changed = True
    while changed:
        changed = False
        for bid in cfg.rpo:
            b = blocks[bid]
            avail = 0 if bid == 0 else universe
            for p in b.preds:
                avail &= out[p] if blocks[p].reachable else universe
            new = transfer(b, avail)
            if new != out[bid]:
                out[bid] = new
                changed = True
    at_end = out[block] if blocks[block].reachable else 0
    for bit, k in enumerate(entries):
        if not at_end >> bit & 1:
            return k
    return None
