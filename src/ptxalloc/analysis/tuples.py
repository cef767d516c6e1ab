"""Register tuples (SPEC section 2; seed 000 "Tensor Register Alignment Requirements").

A vector operand of a memory, texture or tensor instruction (``ld.v4 {a, b, c, d}``, the
fragments of ``mma``/``wmma``/``wgmma``/``ldmatrix``) needs its members in consecutive registers
with the alignment of seed 000's table. Such an operand makes its members one *tuple group*: one
allocation unit whose placement spans all members, each member at a fixed unit offset. A group is
live wherever any member is (the seeds' "a tuple is one allocation unit").

The same registers may appear in several tuple operands (an ``mma`` accumulator that is both C
and D, a ``wmma.load`` fragment fed to ``wmma.mma``): when every occurrence puts each member at
the same offset the occurrences share the group. An occurrence that disagrees with a group
already formed — other neighbours, another order, a register twice (``st.v4 [a], {%r0, %r0,
%r0, %r0}``) — is a *conflict*; the allocator resolves it by copying that occurrence's members
into fresh registers (:mod:`ptxalloc.alloc.legalize`).
"""

from __future__ import annotations

from ..ir import isa
from ..ir.instruction import Instruction
from ..ir.module import Function
from ..ir.operands import Reg, Vec
from ..ir.registers import RegTable
from ..records import field, record
from ..target.units import Shape, tuple_shape, vreg_shape


@record
class TupleGroup:
    members: list[tuple[int, int]]     # (register id, unit offset)
    units: int
    align_regs: int
    occurrences: int = 1

    @property
    def shape(self) -> Shape:
        return tuple_shape(self.units, self.align_regs)


@record
class TupleInfo:
    groups: list[TupleGroup] = field(default_factory=list)
    group_of: dict[int, tuple[int, int]] = field(default_factory=dict)   # reg -> (group, offset)
    conflicts: list[tuple[Instruction, Vec]] = field(default_factory=list)


def _layout(vec: Vec, regs: RegTable) -> tuple[list[tuple[int | None, int]], int] | None:
    """(register or None for a sink/immediate, unit offset) per member and the total units,
    or None when the members' sizes cannot be told (no register member at all)."""
    sizes = []
    for it in vec.items:
        if type(it) is Reg and not it.comp:
            sizes.append(vreg_shape(regs.classes[it.v], regs.vec[it.v]).units)
        else:
            sizes.append(None)
    known = [s for s in sizes if s is not None]
    if not known:
        return None
    fill = max(known)
    out = []
    off = 0
    for it, s in zip(vec.items, sizes):
        s = fill if s is None else s
        out.append((it.v if type(it) is Reg and not it.comp else None, off))
        off += s
    return out, off


def find_tuples(fn: Function, instrs: list[Instruction] | None = None) -> TupleInfo:
    """The tuple groups of a function and the occurrences that conflict with them."""
    regs = fn.regs
    info = TupleInfo()
    group_of = info.group_of
    tuple_bases = isa.TUPLE_BASES
    for ins in (instrs if instrs is not None else fn.instructions()):
        if not ins.ops or ins.base not in tuple_bases:
            continue
        for vec, align in isa.tuple_operands(ins, regs):
            got = _layout(vec, regs)
            if got is None or len(vec.items) == 1:
                continue                   # a one-member "vector" is just the register
            layout, units = got
            members = [(v, off) for v, off in layout if v is not None]
            vids = [v for v, _ in members]
            if len(set(vids)) != len(vids):
                info.conflicts.append((ins, vec))
                continue
            seen = {group_of[v][0] for v in vids if v in group_of}
            if not seen:
                gid = len(info.groups)
                info.groups.append(TupleGroup(members, units, align))
                for v, off in members:
                    group_of[v] = (gid, off)
                continue
            if len(seen) == 1:
                gid = seen.pop()
                g = info.groups[gid]
                if (sorted(g.members) == sorted(members) and g.units == units):
                    g.align_regs = max(g.align_regs, align)
                    g.occurrences += 1
                    continue
            info.conflicts.append((ins, vec))
    return info
