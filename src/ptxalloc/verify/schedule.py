"""Translation validation of an in-block schedule (issue 13; seed 002 "Instruction Scheduling
Interaction"): the scheduled function is a permutation of the original's instructions that
respects every dependence of the original. The checker proves a scheduled allocation
(``schedule=1`` in its header) in two steps: this module validates the permutation the
``//@schedule`` lines record and builds the original in that order, then the allocation is
proven against it (docs/checker.md, "Scheduled allocations").

The dependences are recomputed here from the original alone, independently of the scheduler
(:mod:`ptxalloc.passes.schedule`); only the effect kinds of :mod:`ptxalloc.ir.effects` (a fact
of the instruction set, like the ISA table) are shared. A permutation is accepted when

* it is a permutation of the original's instructions;
* it keeps every instruction in its segment and every segment in its place: a segment is a
  maximal run of instructions with no label, directive, scope brace or declaration between
  them (comments and ``.loc`` lines do not cut), and every instruction of kind ``BARRIER`` is a
  segment of its own, so nothing crosses a barrier, a branch or a call;
* within a segment, for every register: each read stays after the definition that reached it
  in the original (RAW) and before the next definition (WAR), and definitions keep their order
  (WAW) — guards, partial definitions (``v.x``) and the registers in addresses are reads as
  the ISA table says; instructions of kind ``ORDERED`` (memory accesses, warp collectives) keep
  their order, except that loads (``reads_memory_only``: they read memory and write none) may
  pass each other: each load stays after the last store or collective before it in the
  original, and each store or collective after every load before it; the instructions of the
  carry chain keep their order.

That is exactly the condition for the new order to be a topological order of the original's
dependence graph, so the scheduled segment computes what the original segment computes.
"""

from __future__ import annotations

import re

from ..errors import VerificationError
from ..ir.effects import BARRIER, ORDERED, effect_kind, reads_memory_only, uses_carry
from ..ir.instruction import COMMENT, LOC, Instruction, Raw
from ..ir.module import Function

SCHEDULE = "//@schedule"
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?$")


def read_order(allocated: Function, n: int) -> list[int]:
    """The instruction order the ``//@schedule`` comment lines of an allocated function record:
    original instruction indices (0-based, in the original's body order), ``a-b`` standing for
    a, a+1 .. b. Raises VerificationError when they are malformed or not a permutation of
    ``range(n)``."""
    order: list[int] = []
    for s in allocated.body:
        if type(s) is Raw and s.kind == COMMENT and s.text.startswith(SCHEDULE):
            rest = s.text[len(SCHEDULE):]
            if rest[:1] not in ("", " ", "\t"):
                raise VerificationError(f"function '{allocated.name}', line {s.line}: malformed "
                                        f"schedule line '{s.text}'")
            for tok in rest.split():
                m = _RANGE.match(tok)
                if m is None:
                    raise VerificationError(f"function '{allocated.name}', line {s.line}: "
                                            f"malformed schedule entry '{tok}'")
                a = int(m.group(1))
                b = int(m.group(2)) if m.group(2) else a
                if b < a or b >= n:
                    raise VerificationError(f"function '{allocated.name}', line {s.line}: "
                                            f"schedule entry '{tok}' is outside the original's "
                                            f"{n} instructions")
                order.extend(range(a, b + 1))
    if len(order) != n or len(set(order)) != n:
        raise VerificationError(f"function '{allocated.name}': the schedule lists {len(order)} "
                                f"instructions ({len(set(order))} distinct), not a permutation "
                                f"of the original's {n}")
    return order


def segments(fn: Function) -> list[int]:
    """The segment number of each instruction of ``fn`` (module docstring)."""
    seg = []
    current = 0
    open_run = False
    for s in fn.body:
        t = type(s)
        if t is Instruction:
            if effect_kind(s) == BARRIER:
                current += 1
                seg.append(current)
                current += 1
                open_run = False
            else:
                if not open_run:
                    current += 1
                    open_run = True
                seg.append(current)
        elif t is Raw and s.kind in (COMMENT, LOC):
            continue
        else:
            open_run = False
    return seg


def check_schedule(original: Function, order: list[int]) -> None:
    """Raise VerificationError unless ``order`` (original instruction indices in their new
    order) is a dependence-respecting permutation of ``original`` within its segments."""
    instrs = original.instructions()
    n = len(instrs)
    if len(order) != n or sorted(order) != list(range(n)):
        raise VerificationError(f"function '{original.name}': the schedule is not a permutation "
                                f"of the original's {n} instructions")
    seg = segments(original)
    pos = [0] * n
    for k, i in enumerate(order):
        pos[i] = k
        if seg[i] != seg[k]:
            raise VerificationError(
                f"function '{original.name}': the schedule moves original line "
                f"{instrs[i].line} out of its segment (across a label, a directive, a barrier, "
                f"a branch or a call)")
    names = original.regs.names
    last_def: dict[int, int] = {}
    reads: dict[int, list[int]] = {}
    last_ordered = -1           # the last ORDERED instruction that is not a load
    last_carry = -1
    loads_since: list[int] = []     # the loads after it
    current = -1

    def fail(i: int, j: int, why: str) -> VerificationError:
        a, b = instrs[i], instrs[j]
        return VerificationError(
            f"function '{original.name}': the schedule puts original line {b.line} "
            f"'{b.render(names.__getitem__)}' before line {a.line} "
            f"'{a.render(names.__getitem__)}', which it depends on ({why})")

    for j in range(n):
        if seg[j] != current:
            current = seg[j]
            last_def.clear()
            reads.clear()
            last_ordered = last_carry = -1
            loads_since = []
        ins = instrs[j]
        pj = pos[j]
        for u in ins.uses:
            d = last_def.get(u)
            if d is not None and pos[d] > pj:
                raise fail(d, j, f"it reads {names[u]}")
        for d in ins.defs:
            w = last_def.get(d)
            if w is not None and pos[w] > pj:
                raise fail(w, j, f"both write {names[d]}")
            for r in reads.get(d, ()):
                if pos[r] > pj:
                    raise fail(r, j, f"it overwrites {names[d]}, which that one reads")
        for u in ins.uses:
            reads.setdefault(u, []).append(j)
        for d in ins.defs:
            last_def[d] = j
            reads[d] = []
        if effect_kind(ins) == ORDERED:
            if last_ordered >= 0 and pos[last_ordered] > pj:
                raise fail(last_ordered, j, "memory accesses and warp collectives keep their "
                                            "order")
            if reads_memory_only(ins):
                loads_since.append(j)
            else:
                for x in loads_since:
                    if pos[x] > pj:
                        raise fail(x, j, "a load keeps its place relative to the stores and "
                                         "collectives after it")
                loads_since = []
                last_ordered = j
        if uses_carry(ins):
            if last_carry >= 0 and pos[last_carry] > pj:
                raise fail(last_carry, j, "the carry flag")
            last_carry = j


def scheduled_original(original: Function, allocated: Function) -> Function:
    """The original function with its instructions in the order the allocated function's
    ``//@schedule`` lines record, after checking that order (:func:`check_schedule`): what the
    allocation is then proven against."""
    instrs = original.instructions()
    order = read_order(allocated, len(instrs))
    check_schedule(original, order)
    return original.reordered(order)
