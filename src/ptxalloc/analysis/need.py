"""What one instruction needs in registers at once, and the budgets it rules out (SPEC section 2).

An instruction's operands must all sit in registers together: before it, the values it reads
(and, when it is guarded, the ones it may leave unchanged: a false guard keeps the old value,
which must be in its register as the uses are); after it, the values it writes. A register
tuple (an ``ld.v4`` destination, an ``mma`` fragment) counts once, as its whole group; pinned
parameters (``.reg`` parameters, outside allocation) and predicates (a file of their own) do
not count. :func:`check_feasible` refuses a budget that one instruction's operands exceed, and
:func:`largest_need` is the smallest budget none exceeds by count (``--registers auto``'s
floor, seed 004).
"""

from __future__ import annotations

from typing import Callable, Iterator

from ..errors import AllocationError
from ..ir import isa
from ..ir.instruction import Instruction
from ..ir.module import Function
from ..ir.registers import RegClass
from ..target.units import RegFile, Shape, vreg_shape
from .tuples import find_tuples


def group_shapes(fn: Function) -> dict[int, tuple[int, Shape]]:
    """Register -> (its tuple group's key, the group's shape) for tuple members."""
    out = {}
    for key, g in enumerate(find_tuples(fn).groups):
        for v, _ in g.members:
            out[v] = (key, g.shape)
    return out


def operand_shapes(fn: Function, values, groups: dict[int, tuple[int, Shape]],
                   pinned: set[int] | frozenset[int]) -> list[Shape]:
    """The shapes that ``values`` occupy at once: a tuple group counted once, pinned
    parameters and predicates not at all."""
    regs = fn.regs
    shapes = []
    seen = set()
    for v in dict.fromkeys(values):
        if v in pinned or regs.classes[v] == RegClass.PRED:
            continue
        if v in groups:
            key, shape = groups[v]
            if key in seen:
                continue
            seen.add(key)
        else:
            shape = vreg_shape(regs.classes[v], regs.vec[v])
        shapes.append(shape)
    return shapes


def pinned_registers(fn: Function) -> set[int]:
    """The registers of ``fn``'s ``.reg`` parameters (old ABI): fixed, outside allocation."""
    return {p.vid for p in fn.params + fn.returns if p.space == "reg" and p.vid >= 0}


def operand_needs(fn: Function, pinned: set[int] | frozenset[int]
                  ) -> Iterator[tuple[Instruction, list[Shape]]]:
    """Each instruction of ``fn`` with the shapes it needs at once, twice: before it (its uses,
    plus its definitions when it is guarded) and after it (its definitions). The instructions that carry register tuples come first (in program order,
    then the others), so that a refusal blames the tensor or vector instruction that needs a
    tuple rather than a ``mov`` that merely writes one member."""
    regs = fn.regs
    groups = group_shapes(fn)
    instrs = fn.instructions()
    instrs.sort(key=lambda ins: not isa.tuple_operands(ins, regs))      # stable
    for ins in instrs:
        before = ins.uses + ins.defs if ins.guard >= 0 else ins.uses
        for values in (before, ins.defs):
            yield ins, operand_shapes(fn, values, groups, pinned)


def largest_need(fn: Function) -> int:
    """The most 32-bit registers one instruction of ``fn`` needs at once, counting units (a
    lower bound: alignment may need more; :func:`check_feasible` places them)."""
    most = 0
    for _, shapes in operand_needs(fn, pinned_registers(fn)):
        units = sum(s.units for s in shapes)
        if units > most:
            most = units
    return (most + 1) // 2


def check_feasible(fn: Function, regfile: RegFile, pinned: set[int],
                   name: Callable[[int], str]) -> None:
    """Refuse a budget that one instruction's operands alone exceed: raise
    :class:`AllocationError` naming the instruction (``name`` gives registers their names in
    the input)."""
    for ins, shapes in operand_needs(fn, pinned):
        if shapes and not regfile.fits(shapes):
            need = sum(s.units for s in shapes) / 2
            tuples = [s for s in shapes if s.units > 8 or str(s).startswith("TUPLE")]
            what = (f"{len(shapes)} operand(s), among them a {tuples[0].units / 2:g}-register "
                    f"tuple aligned to {tuples[0].align // 2}" if tuples else
                    f"{len(shapes)} operand(s)")
            raise AllocationError(
                f"{fn.filename}:{ins.line}: function '{fn.name}': "
                f"'{ins.render(name)}' needs {need:g} registers at once ({what}), more than "
                f"the budget of {regfile.k} allows")
