"""Pre-pass: make every register tuple allocatable (SPEC section 2; seed 000 "Alignment
Constraints Summary"; :mod:`ptxalloc.analysis.tuples`).

A vector operand whose members cannot join a consistent tuple group — a register twice
(``st.v4 [a], {%r0, %r0, %r0, %r0}``), or members already grouped with other neighbours or in
another order — gets fresh registers for that occurrence: copies into them before the
instruction when the vector is read, copies out of them after it when it is written (and in
before, too, when the instruction is guarded or also reads the vector, so that a false guard
leaves the old values in place). The copies are ordinary moves: the checker follows them and
coalescing may remove them.
"""

from __future__ import annotations

from ..analysis.tuples import find_tuples
from ..ir import build
from ..ir.edits import Edit, EditKind
from ..ir.instruction import DEF, USE, Instruction
from ..ir.module import Function
from ..ir.operands import Mem, Reg, Vec


def legalize_tuples(fn: Function, origin_of: dict[int, int]) -> int:
    """Rewrite ``fn`` in place so that every tuple occurrence is consistent; returns the number
    of copies inserted. New registers are recorded in ``origin_of`` with the value they carry."""
    inserted = 0
    for _ in range(4):                      # a rewrite can expose no new conflict, but be safe
        info = find_tuples(fn)
        if not info.conflicts:
            return inserted
        by_instr: dict[int, list[Vec]] = {}
        for ins, vec in info.conflicts:
            by_instr.setdefault(id(ins), []).append(vec)
        body = []
        for s in fn.body:
            if type(s) is not Instruction or id(s) not in by_instr:
                body.append(s)
                continue
            vecs = by_instr[id(s)]
            pre: list[Instruction] = []
            post: list[Instruction] = []
            new_ops = []
            for op, role in zip(s.ops, s.roles):
                if type(op) is Vec and any(op is v for v in vecs):
                    op = _copy_vec(fn, op, role, s.guard >= 0, pre, post, origin_of, s.line)
                elif type(op) is Mem and any(r is v for r in op.rest for v in vecs):
                    rest = [_copy_vec(fn, r, USE, False, pre, post, origin_of, s.line)
                            if any(r is v for v in vecs) else r for r in op.rest]
                    op = Mem(op.base, op.offset, rest)
                new_ops.append(op)
            body.extend(pre)
            body.append(s.copy_with(new_ops))
            body.extend(post)
            inserted += len(pre) + len(post)
        fn.body = body
    return inserted


def _copy_vec(fn: Function, vec: Vec, role: int, guarded: bool, pre: list, post: list,
              origin_of: dict[int, int], line: int) -> Vec:
    regs = fn.regs
    items = []
    for it in vec.items:
        if type(it) is not Reg or it.comp:
            items.append(it)
            continue
        v = it.v
        t = regs.like(v, f"{regs.names[v]}$t")
        origin_of[t] = origin_of.get(v, v)
        if role & USE or (role & DEF and guarded):
            mv = build.copy(regs, t, v, line)
            mv.origin = Edit(EditKind.MOVE, origin_of[t])
            pre.append(mv)
        if role & DEF:
            mv = build.copy(regs, v, t, line)
            mv.origin = Edit(EditKind.MOVE, origin_of[t])
            post.append(mv)
        items.append(Reg(t))
    return Vec(items)
