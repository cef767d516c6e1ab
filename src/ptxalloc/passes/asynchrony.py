"""Pre-pass: keep the registers of asynchronous tensor instructions live until their wait
(PTX ISA 9.7.15.7.3 ``wgmma.mma_async``, 9.7.16.8 ``tcgen05.ld``/``tcgen05.st``).

An asynchronous instruction keeps reading and writing some of its registers after it issues,
until a matching wait (``wgmma.wait_group 0``, ``tcgen05.wait::ld``/``::st``); touching them
before is undefined. The allocator must therefore neither give those registers to another value
nor spill them in between — on every path, whatever the program itself does to the register
meanwhile (a copy that redefines it on some path ends its live range but not its access).

:func:`ptxalloc.analysis.in_flight.in_flight` finds the registers in flight before each
instruction; :func:`bind_async_waits` then makes every instruction read, implicitly, the
registers in flight before it, so those registers are live, and interfere with every value
defined, through the whole in-flight region; they are never spilled (a store right after the
instruction would read them too early).
"""

from __future__ import annotations

from ..analysis.in_flight import in_flight
from ..ir.instruction import Instruction
from ..ir.module import Function
from ..util import bits


def bind_async_waits(fn: Function) -> set[int]:
    """Make every instruction of ``fn`` read, implicitly, the registers in flight before it
    (in place, on copies of those instructions); returns every register ever in flight, which
    must not be spilled."""
    got = in_flight(fn)
    if got is None:
        return set()
    cfg, before = got
    at = {id(ins): mask for ins, mask in zip(cfg.instrs, before) if mask}
    if not at:
        return set()
    out = 0
    body = []
    for s in fn.body:
        if type(s) is Instruction:
            mask = at.get(id(s))
            if mask:
                out |= mask
                s = s.copy_with(list(s.ops))
                s.implicit_uses = tuple(bits(mask))
                s.set_roles(s.roles)
        body.append(s)
    fn.body = body
    return set(bits(out))

