"""Recomputations at the use, as records (issue 13; seed 002 "Rematerialization"): what the
pass :mod:`ptxalloc.passes.recompute` decided and what the checker rebuilds from the
``//@recompute`` and ``//@dead`` lines of an allocated function (docs/allocated-ptx.md,
"Recomputed functions"), applied to a function the same way by both.

A :class:`Recompute` record ``(define, uses)`` names, by original instruction index (0-based,
in body order), a definition ``op %v, a, b`` and the instructions whose reads of ``%v`` read
instead a fresh register ``%n`` of the same type, defined by a copy ``op %n, a, b`` of the
definition inserted right before the first of ``uses``. A record may carry a *chain*
``inner`` of further definitions (``I1+I2+D>U``, innermost first): each is copied in turn into
a fresh register before the uses, and each copy — the definition's included — reads the fresh
registers of the copies before it in place of their originals' destinations, so that an address
``add %a, %base, %off`` is formed at the access together with the ``mul.wide %off, %idx, 2`` it
reads when ``%off`` itself is not live there. ``dead`` lists original instructions left out. Applying them is mechanical, like :meth:`Function.reordered` for a schedule; whether
the result computes what the original computes is proven separately
(:mod:`ptxalloc.verify.recompute`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .instruction import Instruction
from .module import Function
from .operands import Reg

RECOMPUTE = "//@recompute"
DEAD = "//@dead"
ENTRIES_PER_LINE = 16
_ENTRY = re.compile(r"((?:\d+\+)*)(\d+)>(\d+(?:,\d+)*)$")


class Recompute(NamedTuple):
    """A recomputation of original instruction ``define`` serving ``uses`` (ascending), after
    copies of the ``inner`` definitions its copy reads (innermost first; empty: none)."""

    define: int
    uses: tuple[int, ...]
    inner: tuple[int, ...] = ()

    def token(self) -> str:
        """``I1+I2+D>U1,U2``, as on a ``//@recompute`` line."""
        chain = "".join(f"{i}+" for i in self.inner)
        return f"{chain}{self.define}>{','.join(map(str, self.uses))}"


def record_lines(records: list[Recompute], dead: list[int]) -> list[str]:
    """The ``//@recompute D>U1,U2`` and ``//@dead D ...`` comment lines of ``records``."""
    tokens = [r.token() for r in records]
    lines = [RECOMPUTE + " " + " ".join(tokens[i:i + ENTRIES_PER_LINE])
             for i in range(0, len(tokens), ENTRIES_PER_LINE)]
    dead = sorted(dead)
    lines += [DEAD + " " + " ".join(map(str, dead[i:i + ENTRIES_PER_LINE]))
              for i in range(0, len(dead), ENTRIES_PER_LINE)]
    return lines


def parse_entries(kind: str, rest: str) -> tuple[list[Recompute], list[int]]:
    """The records or dead indices of one line's text after ``kind`` (RECOMPUTE or DEAD);
    raises ValueError naming a malformed entry."""
    records: list[Recompute] = []
    dead: list[int] = []
    for tok in rest.split():
        if kind == DEAD:
            if not tok.isdigit():
                raise ValueError(f"malformed entry '{tok}'")
            dead.append(int(tok))
            continue
        m = _ENTRY.match(tok)
        if m is None:
            raise ValueError(f"malformed entry '{tok}'")
        inner = tuple(int(i) for i in m.group(1).split("+") if i)
        records.append(Recompute(int(m.group(2)), tuple(int(u) for u in m.group(3).split(",")),
                                 inner))
    return records, dead


def fresh_name(fn: Function, base: str, taken: set[str]) -> str:
    """``base$rcK``, the first K whose name the function does not use."""
    k = 0
    while True:
        name = f"{base}$rc{k}"
        if name not in taken:
            taken.add(name)
            return name
        k += 1


def apply_recomputations(fn: Function, records: list[Recompute], dead: list[int]) -> Function:
    """A copy of ``fn`` with each recomputation inserted and its uses redirected, and the
    ``dead`` instructions left out. Fresh registers are numbered after ``fn``'s own, in record
    order. Raises ValueError when a record does not fit the function (an index out of range, a
    definition that is not ``op %v, ...`` of one whole register, a use that does not read
    ``%v``)."""
    instrs = fn.instructions()
    n = len(instrs)
    new = fn.copy()
    regs = new.regs
    taken = set(regs.names)
    before: dict[int, list[Instruction]] = {}
    rewritten: dict[int, Instruction] = {}
    for r in records:
        if not 0 <= r.define < n or not r.uses or any(not 0 <= u < n for u in r.uses) \
                or list(r.uses) != sorted(set(r.uses)) or any(not 0 <= i < n for i in r.inner):
            raise ValueError(f"recomputation {r.token()} does not name instructions of the "
                             f"function's {n} in ascending order")
        copied: dict[int, int] = {}          # original destination -> its fresh copy's register
        v = fresh = -1
        for i in r.inner + (r.define,):
            d = instrs[i]
            dst = d.ops[0] if d.ops else None
            if len(d.defs) != 1 or type(dst) is not Reg or dst.comp or dst.v != d.defs[0]:
                raise ValueError(f"recomputation of line {d.line}: "
                                 f"'{d.render(fn.regs.names.__getitem__)}' does not define one "
                                 f"whole register")
            v = dst.v
            fresh = regs.like(v, fresh_name(fn, regs.names[v], taken))

            def chained(op, copied=copied):
                c = copied.get(op.v)
                return op if c is None else Reg(c, op.comp)

            copy = d.copy_with([Reg(fresh)] + [op.map_regs(chained) for op in d.ops[1:]])
            copy.comment = ""
            before.setdefault(r.uses[0], []).append(copy)
            copied[v] = fresh

        def redirect(op, v=v, fresh=fresh):
            return Reg(fresh, op.comp) if op.v == v else op

        for u in r.uses:
            ins = rewritten.get(u, instrs[u])
            if v not in ins.uses:
                raise ValueError(f"recomputation of line {instrs[r.define].line}: line "
                                 f"{ins.line} does not read {regs.names[v]}")
            rewritten[u] = ins.copy_with([op.map_regs(redirect) for op in ins.ops],
                                         fresh if ins.guard == v else None)
    gone = set(dead)
    if any(not 0 <= i < n for i in gone):
        raise ValueError(f"a dead instruction is outside the function's {n}")
    new.body = splice_body(fn.body, before, rewritten, gone)
    return new


def splice_body(body: list, before: dict[int, list[Instruction]],
                rewritten: dict[int, Instruction], gone: set[int],
                after: dict[int, list[Instruction]] | None = None) -> list:
    """``body`` with, per instruction index ``k`` (instructions only, in body order), the
    instructions ``before[k]`` inserted before it, it replaced by ``rewritten[k]`` or left out
    when ``k`` is in ``gone``, and ``after[k]`` inserted after it; every other statement kept
    where it is. The appliers of the pre-passes' records share it (this module's and
    :mod:`ptxalloc.ir.induction`'s)."""
    after = after or {}
    out = []
    k = 0
    for s in body:
        if type(s) is Instruction:
            out.extend(before.get(k, ()))
            if k not in gone:
                out.append(rewritten.get(k, s))
            out.extend(after.get(k, ()))
            k += 1
        else:
            out.append(s)
    return out
