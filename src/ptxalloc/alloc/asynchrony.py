"""Registers of asynchronous tensor instructions (PTX ISA 9.7.15.7.3 ``wgmma.mma_async``,
9.7.16.8 ``tcgen05.ld``/``tcgen05.st``; :func:`ptxalloc.ir.isa.async_operands`).

An asynchronous instruction keeps reading and writing some of its registers after it issues,
until a matching wait (``wgmma.wait_group``, ``tcgen05.wait::ld``/``::st``); touching them
before is undefined. The allocator must therefore neither give those registers to another value
nor spill them in between. Before allocation every wait is made to read, implicitly, every
register any asynchronous instruction of its kind accesses — so those registers stay live, and
keep their placement, from their definitions to the waits — and those registers are never
spilled (a store right after the instruction would read them too early).
"""

from __future__ import annotations

from ..ir import isa
from ..ir.instruction import Instruction
from ..ir.module import Function


def bind_async_waits(fn: Function) -> set[int]:
    """Give the waits of ``fn`` their implicit uses (in place, on copies of the wait
    instructions); returns the registers that must not be spilled."""
    by_wait: dict[str, set[int]] = {}
    for ins in fn.instructions():
        got = isa.async_operands(ins)
        if got is not None and got[0]:
            by_wait.setdefault(got[1], set()).update(got[0])
    if not by_wait:
        return set()
    body = []
    for s in fn.body:
        if type(s) is Instruction:
            for wait, regs in by_wait.items():
                if s.opcode.startswith(wait):
                    s = s.copy_with(list(s.ops))
                    s.implicit_uses = tuple(sorted(regs))
                    s.set_roles(s.roles)
                    break
        body.append(s)
    fn.body = body
    out: set[int] = set()
    for regs in by_wait.values():
        out |= regs
    return out
