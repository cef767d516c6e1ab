"""Spill slots (seed 002 "Spill Slot Allocation", "Spill Slot Coalescing"; SPEC section 5).

Every spilled register gets a slot in one function-local ``.local`` array, aligned to its size
(2, 4, 8 or 16 bytes). Slots are shared: two spilled registers whose slots are never live at the
same time take the same bytes (spill-slot coloring, as LLVM's StackSlotColoring). A slot is live
from a store to the reloads it reaches, computed by the same backward dataflow as register
liveness, over the final function. A frame over 64 KB is an error (seed 002 edge case 5).
With ``SpillVectorize`` the slots stored or reloaded together are placed side by side, aligned
for one vector access, where that grows the frame not at all (seed 002 "Coalesce Adjacent
Loads/Stores"; the merge itself is :mod:`.vectorize`).
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


def slot_interference(cfg: CFG, keys: list[Slot]):
    """The slot-liveness events per block and, per slot index, the bitset of the slots live
    where it is stored (symmetric)."""
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
    return events, adj


def vector_groups(cfg: CFG, key_index: dict[Slot, int], sizes: list[int]) -> list[list[int]]:
    """Slots worth placing side by side (knob ``SpillVectorize``, :mod:`.vectorize`): per
    *run* — scalar 32- or 64-bit spill accesses of one kind (stores or reloads) with no
    instruction between them — its slots not yet grouped, four 4-byte slots to a group (one
    ``.v4.b32``) or two (one ``.v2``), the runs of the most frequent blocks first. Returns
    the groups as lists of slot indices, in run order."""
    runs = []
    for b in cfg.blocks:
        run: list[int] = []
        run_key = None                  # (kind, opcode) of the run's accesses
        for ins in b.instrs + [None]:
            o = ins.origin if ins is not None else None
            key = None
            if (o is not None and o.slot is not None and ins.guard < 0
                    and ins.opcode[-4:] in (".b32", ".b64") and ".v" not in ins.opcode):
                key = (o.kind, ins.opcode)
            if key is None or key != run_key:
                if len(set(run)) > 1:
                    runs.append((-b.freq * len(run), len(runs), list(dict.fromkeys(run))))
                run = []
            run_key = key
            if key is not None:
                run.append(key_index[o.slot])
    runs.sort()
    grouped: set[int] = set()
    groups = []
    for _, _, run in runs:
        free = [i for i in run if i not in grouped]
        while len(free) >= 2:
            n = 4 if sizes[free[0]] == 4 and len(free) >= 4 else 2
            groups.append(free[:n])
            grouped.update(free[:n])
            free = free[n:]
    return groups


def _layout(units: list[list[int]], sizes: list[int], adj: list[int],
            order_key) -> tuple[dict[int, int], int]:
    """Offsets for slot ``units`` (each a slot alone or a group placed side by side, aligned
    to its whole size): the lowest aligned offset clear of every interfering slot already
    placed, largest units first. Returns the offset of every slot and the bytes used."""
    offset: dict[int, int] = {}
    frame = 0
    for unit in sorted(units, key=lambda u: (-sum(sizes[i] for i in u), order_key(u[0]))):
        size = sum(sizes[i] for i in unit)
        mask = 0
        for i in unit:
            mask |= adj[i]
        busy = sorted((offset[j], offset[j] + sizes[j]) for j in bits(mask) if j in offset)
        off = 0                     # the lowest aligned offset clear of every busy interval
        for lo, hi in busy:
            if hi <= off:
                continue
            if lo >= off + size:
                break
            off = -(-hi // size) * size
        for i in unit:
            offset[i] = off
            off += sizes[i]
        frame = max(frame, off)
    return offset, frame


def assign_slots(cfg: CFG, sizes: dict[Slot, int], array: str, vectorize: bool = False) -> int:
    """Give every slot still accessed an offset, patch the stores and reloads, and return the
    frame size in bytes (a slot whose every access was removed or promoted takes none). With
    ``vectorize``, the slots of :func:`vector_groups` sit side by side where that grows the
    frame not at all (else only groups whose slots interfere anyway, else none)."""
    accessed = {ins.origin.slot for ins in cfg.instrs
                if ins.origin is not None and ins.origin.slot is not None}
    keys = sorted((k for k in sizes if k in accessed), key=Slot.order)
    if not keys:
        return 0
    events, adj = slot_interference(cfg, keys)
    n = len(keys)
    size_of = [sizes[k] for k in keys]
    order_key = keys.__getitem__
    offset, frame = _layout([[i] for i in range(n)], size_of, adj, order_key)
    if vectorize:
        groups = vector_groups(cfg, {k: i for i, k in enumerate(keys)}, size_of)
        disjoint = [g for g in groups
                    if all(adj[i] >> j & 1 for i in g for j in g if i != j)]
        for choice in (groups, disjoint):
            if not choice:
                continue
            inside = {i for g in choice for i in g}
            units = choice + [[i] for i in range(n) if i not in inside]
            got, used = _layout(units, size_of, adj, order_key)
            if (used + 15) // 16 <= (frame + 15) // 16:
                offset, frame = got, used
                break
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
                ins.ops[pos] = Mem(base, f"+{offset[i]}")
    return frame
