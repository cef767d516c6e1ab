"""The checker's ``wgmma.fence`` rule (PTX ISA 9.7.15.5.1 ``wgmma.fence``; docs/checker.md,
"The wgmma fence").

A register that a ``wgmma.mma_async`` accesses asynchronously (its accumulator, a register A
fragment) may be accessed by the thread — written or read — only before the ``wgmma.fence``
that precedes it: the fence must come "between a register access by a thread in the warpgroup
and any wgmma.mma_async instruction that accesses the same registers". The allocation may put
such a register's value there by inserted code (a reload, a copy, a recomputation: spilling
around the in-flight window, :mod:`ptxalloc.spill.windows`), or give its register to another
value read there; :func:`check_fenced_accesses` refuses a write or a read from which a path
with no ``wgmma.fence`` leads to a ``wgmma.mma_async`` that accesses the location
asynchronously — over the allocated function's CFG, so a loop's back edge into the stretch, a
branch into it from elsewhere and a branch over a fence are followed
(:mod:`ptxalloc.ir.fence_stretch`, the one definition the allocator's interference edges
follow too) — by inserted code or by an original instruction the allocation put there (an
original instruction accessing the very value the ``wgmma`` accesses is the program's own
business, as ever). The rule is PTX's, on PTX registers: a write to ``%RD2`` is no access to an
accumulator ``%R4`` even where ptxalloc's register units overlap (ptxas allocates the PTX
registers anew).
"""

from __future__ import annotations

from typing import Callable

from ..ir.fence_stretch import fence_free_ahead
from ..util import bits
from .blocks import Blocks
from .events import Copy, Original, Remat

FENCE_OPCODE = "wgmma.fence"
MMA_FAMILY = "wgmma.mma_async"


def check_fenced_accesses(events: list, fences: list[int], cfg: Blocks,
                        fail_at: Callable[[int, str], Exception],
                        display: list[str]) -> None:
    """``fences`` are the positions of the unguarded ``wgmma.fence`` events (a guarded one
    may not run: a branch over a fence), ``cfg`` the allocated function's blocks over the same
    positions. Raises through ``fail_at`` at the first write or read (in event order) from
    which a path with no ``wgmma.fence`` leads to a ``wgmma.mma_async`` accessing the
    register asynchronously (:func:`ptxalloc.ir.fence_stretch.fence_free_ahead`: the
    function's start counts as a fence, a back edge or a branch into the stretch and a branch
    over a fence are followed): by inserted code, whatever it copies, or by an original
    instruction writing or reading another value than the one the ``wgmma`` accesses there
    (the original accessed its own registers; that one came from the allocation). A
    ``wgmma.mma_async``'s reads of its own accumulator are not counted (the ISA exempts
    accumulator accesses across ``wgmma.mma_async``); its A fragment's are. Its descriptors
    are 64-bit registers, another PTX register file."""
    accessed: list[dict[int, int]] = []         # per wgmma, in order: location -> value
    marks: dict[int, int] = {}
    for idx, ev in enumerate(events):
        if type(ev) is Original and ev.in_flight is not None \
                and ev.in_flight.family.startswith(MMA_FAMILY):
            marks[idx] = 1 << len(accessed)
            accessed.append(dict(ev.in_flight.accessed))
    if not marks:
        return
    ahead = fence_free_ahead(len(events), list(zip(cfg.first, cfg.count)), cfg.succs,
                             set(fences), marks)
    reach: dict[int, dict[int, list[int]]] = {}  # ahead mask -> location -> its values there
    for idx, ev in enumerate(events):
        mask = ahead[idx]
        if not mask:
            continue
        kind = type(ev)
        if kind is Copy:                # inserted: any access there is refused
            writes = ((ev.dst, -1),)
            reads = ((ev.src, -1),) + tuple((loc, -1) for loc, _, _ in ev.address)
        elif kind is Remat:             # inserted too: its register operands (a setp's)
            writes, reads = ((ev.dst, -1),), tuple((loc, -1) for loc, _, _ in ev.reads)
        elif kind is Original:
            writes = ev.defs
            reads = tuple((loc, v) for loc, v, _ in ev.uses)
            if ev.in_flight is not None and ev.in_flight.family.startswith(MMA_FAMILY):
                # a wgmma's reads of its own accumulator are the chain the ISA exempts;
                # its A fragment is read like any register
                reads = tuple(r for r in reads if r not in ev.in_flight.accumulators)
        else:
            continue
        held = reach.get(mask)
        if held is None:
            held = reach[mask] = {}
            for w in bits(mask):
                for loc, v in accessed[w].items():
                    held.setdefault(loc, []).append(v)
        for what, accesses in (("writes", writes), ("reads", reads)):
            for loc, v in accesses:
                values = held.get(loc)
                if values is not None and any(v != x for x in values):
                    raise fail_at(idx, f"{what} {display[loc]} after a wgmma.fence and before "
                                       f"a wgmma.mma_async that accesses it asynchronously (on "
                                       f"a path with no wgmma.fence between): the access must "
                                       f"come before the fence")
