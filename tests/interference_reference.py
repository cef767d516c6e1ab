"""The interference graph of SPEC 4.2 built edge by edge from the live sets, the slow obvious
way: the reference the property and corpus tests hold ``InterferenceGraph`` to."""

from __future__ import annotations

from ptxalloc.ir import isa
from ptxalloc.ir.registers import RegClass
from ptxalloc.util import bits


def expected_adjacency(fn, cfg, lv, pred_mask: int, gpr_mask: int) -> list[int]:
    """Per register, the registers it interferes with: a definition against what is live
    after it (a copy not against its source), registers defined together against each other,
    registers live on entry against each other, a general register defined or read (but
    by a wgmma) where a path with no ``wgmma.fence`` leads to a ``wgmma.mma_async`` against the wgmma's asynchronous
    registers; general registers and predicates apart."""
    classes = fn.regs.classes
    expected = [0] * len(classes)

    def same_file(v: int) -> int:
        return pred_mask if classes[v] == RegClass.PRED else gpr_mask

    def edge(x: int, y: int) -> None:
        expected[x] |= 1 << y
        expected[y] |= 1 << x

    for b in cfg.blocks:
        for ins, live in zip(b.instrs, lv.live_after(b.id)):
            for d in ins.defs:
                want = live & ~(1 << d) & same_file(d)
                if ins.is_copy:
                    want &= ~(1 << ins.uses[0])
                for w in bits(want):
                    edge(d, w)
            for x in ins.defs:
                for y in ins.defs:
                    if x != y and same_file(x) >> y & 1:
                        edge(x, y)
    entry = lv.entry_live
    for v in bits(entry):
        for w in bits(entry & same_file(v) & ~(1 << v)):
            edge(v, w)
    # PTX ISA 9.7.15.5.1: no other value may be written into or read from a register a
    # wgmma.mma_async accesses asynchronously where a path with no wgmma.fence leads from the
    # access to it (the fence, or the function's start, comes before the access on that path);
    # a wgmma's own reads are its own
    if not any(ins.opcode.startswith("wgmma.mma_async") for ins in cfg.instrs):
        return expected
    for p, ins in enumerate(cfg.instrs):
        touched = set(ins.defs)
        if not ins.opcode.startswith("wgmma"):
            touched |= set(ins.uses)
        if not touched:
            continue
        for w in wgmmas_reached(cfg, p):
            accessed = {a for a in (isa.async_operands(cfg.instrs[w]) or [()])[0]
                        if gpr_mask >> a & 1}
            for d in touched:
                if gpr_mask >> d & 1:
                    for a in accessed - {d}:
                        edge(d, a)
    return expected


def wgmmas_reached(cfg, p: int) -> set[int]:
    """The ``wgmma.mma_async`` instruction ids reached from just after instruction ``p`` by
    a path through the CFG that passes no ``wgmma.fence``: a search over the instructions,
    block by block, the obvious way."""
    block = next(b for b in cfg.blocks if b.first <= p < b.first + len(b.instrs))
    found: set[int] = set()
    seen: set[int] = set()
    todo = [(block.id, p - block.first + 1)]
    while todo:
        b, k = todo.pop()
        instrs = cfg.blocks[b].instrs
        while k < len(instrs):
            op = instrs[k].opcode
            if op.startswith("wgmma.fence") and instrs[k].guard < 0:
                break
            if op.startswith("wgmma.mma_async"):
                found.add(cfg.blocks[b].first + k)
            k += 1
        else:
            for s in cfg.blocks[b].succs:
                if s not in seen:
                    seen.add(s)
                    todo.append((s, 0))
    return found
