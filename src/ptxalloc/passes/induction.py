"""Loop-carried families of 64-bit pointers rewritten as one induction variable before
allocation (issue 13, "where ptxas wins": the pointers Triton advances by one stride at the end
of a loop, 32 of them, 64 registers, in the fp16 matmul and attention backward; seed 002
"Integration with other passes").

Triton keeps one 64-bit pointer per element of a tile across a loop and advances every one by
the same stride at the loop's end (``add.s64 %rd1418, %rd1418, %rd1369`` for 32 pointers in a
row). ptxas keeps one base and a 32-bit index per element and forms each address at the access.
This pass does the PTX half of that: in a natural loop with a preheader
(:func:`ptxalloc.passes.hoist.preheader`) a *family* is a set of at least two registers
``%p_i`` (whole scalar 64-bit registers) such that

* each ``%p_i`` is entered by one definition outside the loop, ``add.s64 %p_i, B, O_i``, with
  one *base* B for the family, still holding at the end of the preheader on every path (the
  forward availability of :mod:`ptxalloc.passes.recompute`);
* every write of ``%p_i`` in the loop is one advance ``add.s64 %p_i, %p_i, S`` (unguarded),
  with the same loop-invariant stride S for the whole family (a register the loop never writes,
  or an immediate), and the loop never writes O_i;
* the advances lie in one block, and no instruction between the first and the last reads or
  writes a member (nothing sees a family half advanced);
* no member is live into a block the loop exits to (the members' values after the loop are
  never read), and no member or offset is a register an asynchronous instruction keeps
  accessing (:func:`ptxalloc.ir.isa.async_operands`).

The family is then rewritten (:func:`ptxalloc.ir.induction.apply_families`): one fresh counter
``%q`` set to B at the end of the preheader, ``add.s64 %q, %q, S`` where the family advanced,
the advances left out, each read of ``%p_i`` in the loop reads ``%t = %q + O_i`` formed right
before it, and an entry definition nothing reads any more is left out. The loop then keeps one
counter and the offsets where it kept 2n registers of pointers, and the recomputation pass after
this one (:mod:`ptxalloc.passes.recompute`, with chains) forms each offset at the use from a
32-bit index (Triton's ``mul.wide.s32 %off, %idx, 2``) — ptxas's base plus a 32-bit index per
element. A counter from 0 with reads ``%p_i + %q`` would leave every ``%p_i`` live across the
loop, its base not being live there (docs/decisions.md). On its own the rewrite adds the
counter; it pays through recomputation, so :func:`worth_it` keeps it only when MaxLive after
the passes that follow is lower with it than without it (registers, and no more predicates).

Several families per loop (one per base and stride, members disjoint, largest first), loops
whose blocks are disjoint (an inner loop's family rules out its outer loop's). The decisions are
:class:`~ptxalloc.ir.induction.Family` records, carried in the allocated function's
``//@induction`` lines; :mod:`ptxalloc.verify.induction` proves the rewritten function
equivalent to the original on its own (docs/checker.md, "Induction-variable allocations").
Switch: the knob ``induction`` (1 on, 0 off; off by default: docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.liveness import Liveness
from ..ir import isa
from ..ir.cfg import CFG, Loop
from ..ir.induction import (AFTER, BEFORE, Family, advance_parts, apply_families,
                            base_and_offsets, entry_parts)
from ..ir.module import Function
from ..ir.operands import Reg
from ..ir.registers import RegClass
from ..util import gc_paused
from .hoist import preheader
from .recompute import available_before


@dataclass
class Induced:
    """The rewritten function, its family records and MaxLive (registers, predicates) of the
    passes after it, without and with the rewrite."""

    function: Function
    families: list[Family]
    max_live_before: tuple[int, int] = (0, 0)
    max_live_after: tuple[int, int] = (0, 0)

    def report(self) -> dict:
        return {"families": len(self.families),
                "pointers": sum(len(f.advances) for f in self.families),
                "max_live_before": self.max_live_before[0],
                "max_live_after": self.max_live_after[0]}


def induction_function(fn: Function) -> Induced | None:
    """``fn`` with the families of its loops rewritten as induction variables (module
    docstring), or None when no loop has one."""
    with gc_paused():
        families = find_families(fn)
        if not families:
            return None
        return Induced(apply_families(fn, families), families)


def worth_it(induced: Induced, without: Function, with_it: Function) -> bool:
    """Whether MaxLive of ``with_it`` (the rewritten function through the passes that follow)
    is below that of ``without`` (the function through them without the rewrite), with no more
    predicates; records both figures in ``induced``."""
    from ..analysis import pressure_of
    old = pressure_of(without)
    new = pressure_of(with_it)
    induced.max_live_before = (old.max_live, old.max_preds)
    induced.max_live_after = (new.max_live, new.max_preds)
    return new.max_live < old.max_live and new.max_preds <= old.max_preds


def find_families(fn: Function) -> list[Family]:
    """The families of every loop with a preheader, loops with disjoint blocks, innermost
    first (module docstring)."""
    cfg = CFG(fn)
    if not cfg.loops:
        return []
    instrs = cfg.instrs
    liveness = Liveness(cfg)
    in_flight: set[int] = set()
    for ins in instrs:
        got = isa.async_operands(ins)
        if got is not None:
            in_flight.update(got[0])
    defs_at: dict[int, list[int]] = {}
    for i, ins in enumerate(instrs):
        for d in ins.defs:
            defs_at.setdefault(d, []).append(i)
    taken: set[int] = set()
    out = []
    for loop in sorted(cfg.loops, key=lambda lp: -lp.depth):
        if loop.blocks & taken:
            continue
        p = preheader(cfg, loop)
        if p < 0 or not cfg.blocks[p].instrs:
            continue
        anchor = cfg.blocks[p].instrs[-1]
        if anchor.base in ("brx", "ret", "exit", "trap"):
            continue
        side = BEFORE if anchor.base == "bra" else AFTER
        at = cfg.blocks[p].first + len(cfg.blocks[p].instrs) - 1
        found = _families(cfg, loop, at, liveness, in_flight, defs_at)
        for advances, entries, reads in found:
            out.append(Family(at, side, tuple(advances), tuple(entries), tuple(reads)))
        if found:
            taken |= loop.blocks
    # a family whose base or offset another family advances would read, at the counter's start
    # or at a redirected read, a member the rewrite no longer advances: left alone
    members = {advance_parts(instrs[k])[0] for f in out for k in f.advances}
    out = [f for f in out
           if not any(type(x) is Reg and x.v in members
                      for x in _base_and_offset_operands(instrs, f))]
    out.sort()
    return out


def _base_and_offset_operands(instrs, family: Family) -> list:
    """The base and every offset of a family's entry definitions."""
    base, offsets = base_and_offsets([instrs[k] for k in family.entries])
    return [base, *offsets]


def _families(cfg: CFG, loop: Loop, anchor: int, liveness: Liveness, in_flight: set[int],
              defs_at: dict[int, list[int]]) -> list[tuple[list[int], list[int], list[int]]]:
    """(advances, entries, reads) of each family of the loop, largest first, members
    disjoint."""
    fn = cfg.fn
    regs = fn.regs
    instrs = cfg.instrs
    body = sorted(cfg.blocks[b].first + k for b in loop.blocks
                  for k in range(len(cfg.blocks[b].instrs)))
    inside = set(body)
    written = 0
    for i in body:
        for d in instrs[i].defs:
            written |= 1 << d
    live_out = 0
    for b in loop.blocks:
        for s in cfg.blocks[b].succs:
            if s not in loop.blocks:
                live_out |= liveness.live_in[s]
    # candidate advances: (advance, member, stride, entry definition)
    candidates = []
    define = {}
    for i in body:
        parts = advance_parts(instrs[i])
        if parts is None:
            continue
        p, stride = parts
        if regs.classes[p] != RegClass.GPR64 or regs.vec[p] or live_out >> p & 1 \
                or p in in_flight or (type(stride) is Reg and written >> stride.v & 1):
            continue
        at = defs_at[p]
        outside = [k for k in at if k not in inside]
        if [k for k in at if k in inside] != [i] or len(outside) != 1:
            continue
        entry = entry_parts(instrs[outside[0]])
        if entry is None or any(type(x) is Reg and (written >> x.v & 1 or x.v in in_flight)
                                for x in entry[1:]):
            continue
        candidates.append((i, p, stride, outside[0]))
        define[p] = outside[0]
    if not candidates:
        return []
    # the entry definitions must still hold at the end of the preheader
    avail = available_before(cfg, instrs, define)[anchor]
    clobbered = set(instrs[anchor].defs)      # written by the anchor, before the counter's start
    groups: dict[tuple, list[tuple[int, int, int]]] = {}
    for i, p, stride, e in candidates:
        if not avail >> p & 1 or p in clobbered or any(
                type(x) is Reg and x.v in clobbered for x in entry_parts(instrs[e])[1:]):
            continue
        skey = ("r", stride.v) if type(stride) is Reg else ("i", stride.text)
        for base in entry_parts(instrs[e])[1:]:
            bkey = ("r", base.v) if type(base) is Reg else ("i", base.text)
            groups.setdefault((cfg.block_of[i], skey, bkey), []).append((i, p, e))
    found = []
    used: set[int] = set()
    for key in sorted(groups, key=lambda k: -len(groups[k])):
        members = [m for m in groups[key] if m[1] not in used]
        if len(members) < 2 or base_and_offsets([instrs[e] for _, _, e in members]) is None:
            continue
        family = {p for _, p, _ in members}
        advances = [i for i, _, _ in members]
        first, last = advances[0], advances[-1]
        if any(i not in advances and any(r in family for r in instrs[i].uses + instrs[i].defs)
               for i in range(first + 1, last)):
            continue
        reads = [i for i in body if i not in advances
                 and any(u in family for u in instrs[i].uses)]
        if any(r in in_flight for i in reads for r in instrs[i].uses):
            continue
        found.append((advances, [e for _, _, e in members], reads))
        used |= family
    return found
