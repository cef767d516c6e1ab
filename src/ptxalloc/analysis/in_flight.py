"""Registers of asynchronous tensor instructions in flight (PTX ISA 9.7.15.7.3
``wgmma.mma_async``, 9.7.16.8 ``tcgen05.ld``/``tcgen05.st``;
:func:`ptxalloc.ir.isa.async_operands`).

An asynchronous instruction keeps reading and writing some of its registers after it issues,
until a matching wait (``wgmma.wait_group 0``, ``tcgen05.wait::ld``/``::st``). :func:`in_flight`
finds, by a forward dataflow over the CFG, the registers in flight before each instruction:
those of the asynchronous instructions issued on some path since the last wait that retires
them. It counts as the checker does (:mod:`ptxalloc.verify.dataflow`): only
``wgmma.wait_group 0`` retires a ``wgmma`` — ``wait_group N`` with N > 0 does not say which
groups are done. The pre-passes :mod:`ptxalloc.passes.serialize_wgmma` and
:mod:`ptxalloc.passes.asynchrony` read it, and :mod:`ptxalloc.spill.windows` (spilling around
a group's window).
"""

from __future__ import annotations

from ..ir import isa
from ..ir.cfg import CFG
from ..ir.instruction import Instruction
from ..ir.module import Function
from ..ir.operands import Imm

WGMMA_WAIT = "wgmma.wait_group"


def retires(ins: Instruction) -> str | None:
    """The wait prefix (as :func:`isa.async_operands` names it) whose in-flight registers
    ``ins`` retires, or None."""
    opc = ins.opcode
    if opc.startswith(WGMMA_WAIT):
        ops = ins.ops
        if ops and type(ops[0]) is Imm and ops[0].text.strip() == "0":
            return WGMMA_WAIT
        return None
    if opc.startswith(("tcgen05.wait::ld", "tcgen05.wait::st")):
        return opc[:len("tcgen05.wait::ld")]
    return None


def _transfer(ins: Instruction, pending: dict[str, int]) -> dict[str, int]:
    """Pending registers (bitset per wait prefix) after ``ins``, given those before it."""
    wait = retires(ins)
    if wait is not None and pending.get(wait):
        pending = {k: m for k, m in pending.items() if k != wait}
    got = isa.async_operands(ins)
    if got is not None and got[0]:
        regs, wait = got
        mask = 0
        for v in regs:
            mask |= 1 << v
        if pending.get(wait, 0) | mask != pending.get(wait, 0):
            pending = dict(pending)
            pending[wait] = pending.get(wait, 0) | mask
    return pending


def in_flight(fn: Function, cfg: CFG | None = None) -> tuple[CFG, list[int]] | None:
    """Per instruction of ``cfg.instrs``, the bitset of registers in flight before it (on some
    path); None when ``fn`` has no asynchronous instruction with register operands."""
    if not any(isa.async_operands(ins) for ins in fn.instructions()):
        return None
    cfg = cfg or CFG(fn)
    blocks = cfg.blocks
    entry: list[dict[str, int] | None] = [None] * len(blocks)
    entry[0] = {}
    exits: list[dict[str, int] | None] = [None] * len(blocks)
    work = list(cfg.rpo)
    queued = set(work)
    while work:
        b = work.pop(0)
        queued.discard(b)
        pending = entry[b] or {}
        for ins in blocks[b].instrs:
            pending = _transfer(ins, pending)
        if exits[b] == pending:
            continue
        exits[b] = pending
        for s in blocks[b].succs:
            old = entry[s]
            new = dict(old) if old else {}
            for k, m in pending.items():
                new[k] = new.get(k, 0) | m
            if new != old:
                entry[s] = new
                if s not in queued:
                    queued.add(s)
                    work.append(s)
    before = [0] * len(cfg.instrs)
    for b in blocks:
        pending = entry[b.id] or {}
        i = b.first
        for ins in b.instrs:
            total = 0
            for m in pending.values():
                total |= m
            before[i] = total
            pending = _transfer(ins, pending)
            i += 1
    return cfg, before
