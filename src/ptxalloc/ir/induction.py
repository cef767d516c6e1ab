"""Families of loop-carried pointers rewritten as one induction variable, as records (issue 13,
"where ptxas wins": loop-carried families of 64-bit pointers advanced by one stride; seed 002
"Integration with other passes"): what the pass :mod:`ptxalloc.passes.induction` decided and
what the checker rebuilds from the ``//@induction`` lines of an allocated function
(docs/allocated-ptx.md, "Induction-variable functions"), applied the same way by both.

A :class:`Family` record ``(anchor, side, advances, entries, reads)`` names, by original
instruction index (0-based, in body order):

* ``advances``: the family's updates ``add.s64 %p_i, %p_i, S`` (ascending), one per member
  ``%p_i``, all with the same stride S. A copy ``add.s64 %q, %q, S`` goes right before the
  first, and every one of them is left out;
* ``entries``: per advance, the definition ``add.s64 %p_i, B, O_i`` of its member before the
  loop; B, the *base*, is the operand all of them share (the first when both are shared), O_i
  the member's *offset*;
* ``anchor`` and ``side`` (``<`` before it, ``>`` after it): where ``mov.b64 %q, B`` goes, the
  last instruction of the loop's preheader: the counter starts at the base;
* ``reads``: the loop's instructions reading a member (ascending). Right before each, for each
  member it reads (in operand order), ``add.s64 %t, %q, O_i`` into a fresh register ``%t``,
  and the instruction reads ``%t`` in place of ``%p_i``;
* an entry definition whose member nothing reads any more is left out.

In the loop ``%p_i`` then always equals ``%q + O_i`` outside the advances: the family's 2n
registers become one counter and n offsets (which :mod:`ptxalloc.passes.recompute` can in turn
form at the use from a 32-bit index). ``%q`` and every ``%t`` are fresh registers of the first
member's type, numbered after the function's own in record order. Applying records is
mechanical, like :func:`ptxalloc.ir.recompute.apply_recomputations`; whether the result computes
what the original computes is proven separately (:mod:`ptxalloc.verify.induction`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from . import isa
from .instruction import Instruction
from .module import Function
from .operands import Imm, Reg
from .recompute import splice_body

INDUCTION = "//@induction"
_LIST = r"(\d+(?:,\d+)*)"
_LINE = re.compile(r"(\d+)([<>])\s+" + _LIST + r"\s+" + _LIST + r"\s+(-|\d+(?:,\d+)*)$")
BEFORE, AFTER = "<", ">"


class Family(NamedTuple):
    """One family: the counter's initialization at ``anchor`` (``side``), the ``advances``
    replaced by one advance of the counter, the members' ``entries`` definitions, the ``reads``
    redirected (module docstring)."""

    anchor: int
    side: str
    advances: tuple[int, ...]
    entries: tuple[int, ...]
    reads: tuple[int, ...]

    def line(self) -> str:
        """The ``//@induction`` line of this record."""
        reads = ",".join(map(str, self.reads)) or "-"
        return (f"{INDUCTION} {self.anchor}{self.side} {','.join(map(str, self.advances))} "
                f"{','.join(map(str, self.entries))} {reads}")


def parse_line(rest: str) -> Family:
    """The record of one line's text after ``//@induction``; ValueError when malformed."""
    m = _LINE.match(rest.strip())
    if m is None:
        raise ValueError(f"malformed induction record '{rest.strip()}'")
    reads = () if m.group(5) == "-" else tuple(int(k) for k in m.group(5).split(","))
    return Family(int(m.group(1)), m.group(2), tuple(int(k) for k in m.group(3).split(",")),
                  tuple(int(k) for k in m.group(4).split(",")), reads)


def advance_parts(ins: Instruction) -> tuple[int, object] | None:
    """(member, stride operand) of ``add.s64 %p, %p, S`` / ``add.s64 %p, S, %p`` (also ``.u64``),
    unguarded, ``%p`` a whole register and S a whole register or an immediate; else None."""
    if ins.opcode not in ("add.s64", "add.u64") or ins.guard >= 0 or len(ins.ops) != 3:
        return None
    dst, a, b = ins.ops
    if type(dst) is not Reg or dst.comp:
        return None
    for mine, other in ((a, b), (b, a)):
        if type(mine) is Reg and not mine.comp and mine.v == dst.v:
            if type(other) is Imm or (type(other) is Reg and not other.comp
                                      and other.v != dst.v):
                return dst.v, other
    return None


def entry_parts(ins: Instruction) -> tuple[int, object, object] | None:
    """(member, a, b) of an entry definition ``add.s64 %p, a, b`` (also ``.u64``), unguarded,
    a and b whole registers other than ``%p`` or immediates; else None."""
    if ins.opcode not in ("add.s64", "add.u64") or ins.guard >= 0 or len(ins.ops) != 3:
        return None
    dst, a, b = ins.ops
    if type(dst) is not Reg or dst.comp:
        return None
    for x in (a, b):
        if not (type(x) is Imm or (type(x) is Reg and not x.comp and x.v != dst.v)):
            return None
    return dst.v, a, b


def base_and_offsets(entries: list[Instruction]) -> tuple[object, list] | None:
    """The base all ``entries`` share and each one's offset (module docstring: the first
    operand when every entry has the same one, else the second), or None when they share
    neither or one is not an entry definition."""
    parts = [entry_parts(ins) for ins in entries]
    if not parts or any(x is None for x in parts):
        return None
    for k in (1, 2):
        base = parts[0][k]
        if all(same_operand(base, x[k]) for x in parts):
            return base, [x[3 - k] for x in parts]
    return None


def same_operand(x, y) -> bool:
    """Whether two stride operands are the same register or the same immediate text."""
    if type(x) is not type(y):
        return False
    return x.v == y.v if type(x) is Reg else x.text == y.text


def _fresh_name(base: str, taken: set[str]) -> str:
    k = 0
    while f"{base}$iv{k}" in taken:
        k += 1
    taken.add(f"{base}$iv{k}")
    return f"{base}$iv{k}"


def apply_families(fn: Function, families: list[Family]) -> Function:
    """A copy of ``fn`` with each family rewritten (module docstring). Raises ValueError when a
    record does not fit the function (an index out of range or out of order, an advance that is
    not ``add.s64 %p, %p, S``, a read that reads no member)."""
    instrs = fn.instructions()
    n = len(instrs)
    new = fn.copy()
    regs = new.regs
    taken = set(regs.names)
    before: dict[int, list[Instruction]] = {}
    after: dict[int, list[Instruction]] = {}
    rewritten: dict[int, Instruction] = {}
    gone: set[int] = set()
    for f in families:
        where = [f.anchor, *f.advances, *f.entries, *f.reads]
        if any(not 0 <= k < n for k in where) or list(f.advances) != sorted(set(f.advances)) \
                or list(f.reads) != sorted(set(f.reads)) or f.side not in (BEFORE, AFTER) \
                or not f.advances or len(f.entries) != len(f.advances):
            raise ValueError(f"induction record '{f.line()}' does not name instructions of the "
                             f"function's {n} in ascending order, one entry per advance")
        members = []
        for k in f.advances:
            parts = advance_parts(instrs[k])
            if parts is None:
                raise ValueError(f"induction record '{f.line()}': line {instrs[k].line} is not "
                                 f"an advance 'add.s64 %p, %p, S'")
            members.append(parts[0])
        shared = base_and_offsets([instrs[k] for k in f.entries])
        if shared is None or [entry_parts(instrs[k])[0] for k in f.entries] != members:
            raise ValueError(f"induction record '{f.line()}': the entries are not definitions "
                             f"'add.s64 %p, B, O' of the members with one base B")
        base, offsets = shared
        offset_of = dict(zip(members, offsets))
        first = members[0]
        q = regs.like(first, _fresh_name(regs.names[first], taken))
        init = Instruction("mov.b64", [Reg(q), base], line=instrs[f.anchor].line)
        isa.classify(init, regs)
        (before if f.side == BEFORE else after).setdefault(f.anchor, []).append(init)
        stride = advance_parts(instrs[f.advances[0]])[1]
        step = Instruction("add.s64", [Reg(q), Reg(q), stride], line=instrs[f.advances[0]].line)
        isa.classify(step, regs)
        before.setdefault(f.advances[0], []).append(step)
        gone.update(f.advances)
        for k in f.reads:
            ins = rewritten.get(k, instrs[k])
            read = [u for u in ins.uses if u in offset_of]
            if not read:
                raise ValueError(f"induction record '{f.line()}': line {ins.line} reads no "
                                 f"member of the family")
            fresh = {}
            for p in read:
                t = regs.like(p, _fresh_name(regs.names[p], taken))
                add = Instruction("add.s64", [Reg(t), Reg(q), offset_of[p]], line=ins.line)
                isa.classify(add, regs)
                before.setdefault(k, []).append(add)
                fresh[p] = t

            def redirect(op, fresh=fresh):
                t = fresh.get(op.v)
                return op if t is None else Reg(t, op.comp)

            rewritten[k] = ins.copy_with([op.map_regs(redirect) for op in ins.ops])
    read = set()
    for k, ins in enumerate(instrs):
        if k not in gone:
            read.update(rewritten.get(k, ins).uses)
    for inserted in (*before.values(), *after.values()):
        for ins in inserted:
            read.update(ins.uses)
    for f in families:
        gone.update(k for k in f.entries if instrs[k].defs[0] not in read)
    new.body = splice_body(fn.body, before, rewritten, gone, after)
    return new
