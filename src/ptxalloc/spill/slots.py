"""Spill slots (seed 002 "Spill Slot Allocation", "Spill Slot Coalescing"; SPEC section 5).

Every spilled register gets a slot in one function-local ``.local`` array, aligned to its size
(2, 4, 8 or 16 bytes). Slots are shared: two spilled registers whose slots are never live at the
same time take the same bytes (spill-slot coloring, as LLVM's StackSlotColoring). A slot is live
from a store to the reloads it reaches, computed by the same backward dataflow as register
liveness, over the final function. A frame over 64 KB is an error (seed 002 edge case 5).
"""

from __future__ import annotations

from ..errors import AllocationError
from ..ir.cfg import CFG
from ..ir.edits import Slot
from ..ir.operands import Mem, Reg, Sym
from ..util import bits

MAX_FRAME = 64 * 1024


def slot_liveness(cfg: CFG, key_index: dict[Slot, int]):
    """Per block live-out bitsets over slot indices (reload = use, store = definition: the
    spill stores and reloads, the saves around calls and the callee-saved prologue and
    epilogues, by their :class:`~ptxalloc.ir.edits.Edit`)."""
    blocks = cfg.blocks
    gen = [0] * len(blocks)
    kill = [0] * len(blocks)
    events = []
    for b in blocks:
        g = k = 0
        ev = []
        for ins in b.instrs:
            o = ins.origin
            if o is not None and o.slot is not None:
                i = key_index[o.slot]
                bit = 1 << i
                if o.loads:
                    if not k & bit:
                        g |= bit
                    ev.append((ins, i, False))
                else:
                    k |= bit
                    ev.append((ins, i, True))
            else:
                ev.append((ins, -1, False))
        gen[b.id], kill[b.id] = g, k
        events.append(ev)
    live_in = [0] * len(blocks)
    live_out = [0] * len(blocks)
    changed = True
    order = cfg.rpo[::-1] + [b.id for b in blocks if not b.reachable]
    while changed:
        changed = False
        for bid in order:
            out = 0
            for s in blocks[bid].succs:
                out |= live_in[s]
            new_in = gen[bid] | (out & ~kill[bid])
            if out != live_out[bid] or new_in != live_in[bid]:
                live_out[bid] = out
                live_in[bid] = new_in
                changed = True
    return events, live_out


def assign_slots(cfg: CFG, sizes: dict[Slot, int], array: str) -> int:
    """Give every slot still accessed an offset, patch the stores and reloads, and return the
    frame size in bytes (a slot whose every access was removed or promoted takes none)."""
    accessed = {ins.origin.slot for ins in cfg.instrs
                if ins.origin is not None and ins.origin.slot is not None}
    keys = sorted((k for k in sizes if k in accessed), key=Slot.order)
    if not keys:
        return 0
    key_index = {k: i for i, k in enumerate(keys)}
    events, live_out = slot_liveness(cfg, key_index)
    n = len(keys)
    adj = [0] * n
    for b, ev in zip(cfg.blocks, events):
        live = live_out[b.id]
        for ins, i, is_store in reversed(ev):
            if i < 0:
                continue
            if is_store:
                adj[i] |= live & ~(1 << i)
                live &= ~(1 << i)
            else:
                live |= 1 << i
    for i in range(n):
        for j in bits(adj[i]):
            adj[j] |= 1 << i
    offset: dict[int, int] = {}
    frame = 0
    order = sorted(range(n), key=lambda i: (-sizes[keys[i]], keys[i]))
    for i in order:
        size = sizes[keys[i]]
        busy = []
        for j in bits(adj[i]):
            if keys[j] in offset:
                busy.append((offset[keys[j]], offset[keys[j]] + sizes[keys[j]]))
        busy.sort()
        off = 0                     # the lowest aligned offset clear of every busy interval
        for lo, hi in busy:
            if hi <= off:
                continue
            if lo >= off + size:
                break
            off = -(-hi // size) * size
        offset[keys[i]] = off
        frame = max(frame, off + size)
    frame = (frame + 15) // 16 * 16
    if frame > MAX_FRAME:
        raise AllocationError(f"function '{cfg.fn.name}': spill frame of {frame} bytes exceeds "
                              f"the {MAX_FRAME}-byte limit (seed 002 edge case 5)")
    for ev in events:
        for ins, i, _ in ev:
            if i >= 0:
                k = ins.ops[0] if type(ins.ops[0]) is Mem else ins.ops[1]
                pos = ins.ops.index(k)
                # a shared spill slot keeps its base register (:mod:`shared`)
                base = k.base if type(k.base) is Reg else Sym(array)
                ins.ops[pos] = Mem(base, f"+{offset[keys[i]]}")
    return frame
