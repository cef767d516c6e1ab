"""Spilling the registers of a ``wgmma`` group around its in-flight window (PTX ISA 9.7.15.5.1
``wgmma.fence``, 9.7.15.7.3 ``wgmma.mma_async``, 9.7.15.7.5 ``wgmma.wait_group``; ptxas's
"wgmma.mma_async instructions are serialized"; issue 13).

The accumulators and register A fragments of a ``wgmma.mma_async`` may be touched neither
after it issues nor before the ``wgmma.wait_group 0`` that retires it; and a register they use
must be written before the ``wgmma.fence`` that opens the group (the fence orders the
warpgroup's register accesses before the ``wgmma`` that reads them). Between windows such a
register is an ordinary value. :mod:`ptxalloc.passes.asynchrony` keeps it live through its
window; this module lets the allocator spill it *around* the window instead of never:

a *window* of register ``v`` is the straight run of one block from the ``wgmma.fence`` that
precedes the ``wgmma.mma_async`` putting ``v`` in flight up to the ``wgmma.wait_group 0`` that
retires it. A spilled ``v`` gets one temporary per window, reloaded before the fence (when the
window reads ``v``), written by the group, stored after the wait (when the group writes
``v``), and never spilled itself; elsewhere ``v`` is spilled as any value. After
:mod:`ptxalloc.passes.serialize_wgmma` each group's window is the group itself, so accumulators
can leave their registers while the code between groups runs — what ptxas does when it
serializes. A register with a window that is not such a run (a group still in flight across a
branch or at the end of a block, no fence before it in its block, ``tcgen05``) stays
unspillable. The code is only reloads and stores of the value's slot, so the allocation checker
proves it as it proves any spill code, with its rule that inserted code never touches a
register in flight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.in_flight import WGMMA_WAIT, in_flight, retires
from ..errors import InternalError
from ..ir import isa
from ..ir.cfg import CFG
from ..ir.instruction import Instruction
from ..ir.module import Function
from ..records import record

if TYPE_CHECKING:     # the plan is built by spill.split, imported only when something spills
    from .split import SplitPlan

FENCE = isa.WGMMA_FENCE


@record
class Window:
    """One in-flight window of a register: the ids (in ``cfg.instrs``) of the fence opening
    it and of the wait closing it; ``reads`` when an instruction of it reads the register
    before writing it all (a reload before the fence is needed), ``writes`` when one writes it
    (a store after the wait is needed)."""

    fence: int
    wait: int
    reads: bool
    writes: bool


def find_windows(fn: Function, cfg: CFG | None = None) -> tuple[dict[int, list[Window]],
                                                                   set[int]]:
    """The windows of every register a ``wgmma.mma_async`` accesses asynchronously (ids in
    ``cfg.instrs``), and the registers in flight somewhere that have a window that is not a
    clean run (or are in flight for another instruction than ``wgmma``): those may not be
    spilled. A function without asynchronous instructions costs one scan (no CFG)."""
    got = in_flight(fn, cfg)
    windows: dict[int, list[Window]] = {}
    unclean: set[int] = set()
    if got is None:
        return windows, unclean
    cfg, before = got
    instrs = cfg.instrs
    n = len(instrs)
    block_end = [0] * n
    block_first = [0] * n
    for b in cfg.blocks:
        for i in range(b.first, b.first + len(b.instrs)):
            block_first[i] = b.first
            block_end[i] = b.first + len(b.instrs)
    for i, ins in enumerate(instrs):
        got_async = isa.async_operands(ins)
        if got_async is None:
            continue
        regs, _ = got_async
        if not ins.opcode.startswith("wgmma.mma_async"):
            unclean.update(regs)
            continue
        for v in regs:
            if before[i] >> v & 1:
                continue            # in flight already: the same window, opened earlier
            w = _window(instrs, before, v, i, block_first[i], block_end[i])
            if w is None:
                unclean.add(v)
            else:
                windows.setdefault(v, []).append(w)
    # a register in flight where no window of it covers (e.g. across a block boundary)
    covered: dict[int, list[tuple[int, int]]] = {
        v: [(w.fence, w.wait) for w in ws] for v, ws in windows.items()}
    for i, mask in enumerate(before):
        while mask:
            low = mask & -mask
            v = low.bit_length() - 1
            mask ^= low
            if v in unclean:
                continue
            if not any(lo < i <= hi for lo, hi in covered.get(v, ())):
                unclean.add(v)
    for v in unclean:
        windows.pop(v, None)
    return windows, unclean


def _window(instrs: list[Instruction], before: list[int], v: int, issue: int, first: int,
            end: int) -> Window | None:
    """The window of ``v`` put in flight by the ``wgmma`` at ``issue`` (ids of one block,
    ``first`` .. ``end``), or None when it is not a clean run."""
    fence = next((j for j in range(issue - 1, first - 1, -1)
                  if instrs[j].opcode.startswith(FENCE)), None)
    if fence is None or any(before[j] >> v & 1 for j in range(fence, issue)):
        return None
    # the closing wait: the block's first ``wgmma.wait_group 0`` after the issue
    wait = next((j for j in range(issue + 1, end) if retires(instrs[j]) == WGMMA_WAIT), None)
    if wait is None:
        return None
    reads = writes = False
    done = False
    for j in range(fence, wait + 1):
        ins = instrs[j]
        explicit_uses = set(ins.uses) - set(ins.implicit_uses)
        if not done and v in explicit_uses:
            reads = True
        if v in ins.defs:
            writes = True
            if ins.guard < 0 and v not in ins.uses:
                done = True
    return Window(fence, wait, reads, writes)


def spillable_in_flight(fn: Function) -> set[int]:
    """The registers of ``fn`` in flight somewhere whose every window is a clean run: those
    the allocator may spill around their windows."""
    return set(find_windows(fn)[0])


def plan_window_runs(cfg: CFG, spill: set[int], plan: SplitPlan) -> set[int]:
    """Add to ``plan`` one run per window of each register of ``spill`` that is in flight
    somewhere in ``cfg``'s function: every occurrence of the register from the fence to the
    wait reads or writes the run's temporary, reloaded before the fence and stored after the
    wait as the window needs. Returns the registers so planned (to keep out of the other
    splits). Raises :class:`InternalError` for a register in flight whose windows are not
    clean runs (the driver never spills one)."""
    windows, unclean = find_windows(cfg.fn, cfg)
    bad = spill & unclean
    if bad:
        raise InternalError(f"registers in flight outside a clean wgmma window were chosen "
                            f"for spilling: {sorted(bad)}")
    planned = spill & set(windows)
    instrs = cfg.instrs
    for v in sorted(planned):
        for w in windows[v]:
            run = plan.new_run()
            plan.window_runs.add(run)
            for j in range(w.fence, w.wait + 1):
                ins = instrs[j]
                if v in ins.uses or v in ins.defs:
                    plan.run_of[(id(ins), v)] = run
            if w.reads:
                plan.loop_reloads.setdefault(id(instrs[w.fence]), []).append((v, run))
            if w.writes:
                plan.stores_after.setdefault(id(instrs[w.wait]), []).append((v, run))
    return planned
