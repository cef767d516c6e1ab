"""The checker's ``wgmma.fence`` rule (PTX ISA 9.7.15.5.1 ``wgmma.fence``;
docs/checker.md, "Registers of a wgmma group spilled around its window").

A register that a ``wgmma.mma_async`` accesses asynchronously (its accumulator, a register A
fragment) must be written before the ``wgmma.fence`` that precedes it: the fence is what orders
the warpgroup's register writes before the ``wgmma`` reads them. The allocation may put such a
register's value there by inserted code (a reload, a copy, a recomputation: spilling around
the in-flight window, :mod:`ptxalloc.spill.windows`); :func:`check_fenced_writes` refuses
a write, between a block's last ``wgmma.fence`` and a ``wgmma.mma_async``, to a location the
``wgmma`` accesses asynchronously, by inserted code or by an original instruction the allocation
put there (an original instruction writing the very value the ``wgmma`` accesses is the
program's own business, as ever). The rule is PTX's, on PTX registers: a write to ``%RD2`` is
no access to an accumulator ``%R4`` even where ptxalloc's register units overlap (ptxas
allocates the PTX registers anew).
"""

from __future__ import annotations

from typing import Callable

from .events import Copy, Original, Remat

FENCE_OPCODE = "wgmma.fence"


def check_fenced_writes(events: list, fences: list[int],
                        fail_at: Callable[[int, str], Exception],
                        display: list[str]) -> None:
    """``fences`` are the positions, in order, of the events a ``wgmma.fence`` comes just
    before. Raises through ``fail_at`` at the
    first write, after the last fence before a ``wgmma.mma_async`` in the text (or the
    function's start), to a register the ``wgmma`` accesses asynchronously: by inserted code,
    or by an original instruction writing another value than the one the ``wgmma`` accesses
    there (the original wrote its own registers; that one came from the allocation). A label
    in between does not end the stretch (the code before it falls through). Not followed: a
    jump from elsewhere into the stretch (a loop's back edge to a label between a fence and
    its wgmma) — the allocator never puts spill code there (its windows are straight runs
    from the fence, :mod:`ptxalloc.spill.windows`), and the text order is all this rule
    reads."""
    # (event, location, value; -1 inserted), since the last fence in the text or the function's
    # start: a label does not end the stretch, since the code before it falls through into it
    written: list[tuple[int, int, int]] = []
    m = 0
    for idx, ev in enumerate(events):
        while m < len(fences) and fences[m] <= idx:
            written = []
            m += 1
        kind = type(ev)
        if kind is Copy or kind is Remat:
            written.append((idx, ev.dst, -1))
        elif kind is Original:
            if ev.in_flight is not None and written:
                accessed = dict(ev.in_flight.accessed)
                for w, loc, v in written:
                    if loc in accessed and v != accessed[loc]:
                        raise fail_at(w, f"writes {display[loc]} after a wgmma.fence and "
                                         f"before a wgmma.mma_async that accesses it "
                                         f"asynchronously: the write must come before the "
                                         f"fence")
            written.extend((idx, loc, v) for loc, v in ev.defs)
