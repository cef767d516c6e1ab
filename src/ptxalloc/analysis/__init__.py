"""Analyses that drive allocation: liveness, interference, spill costs, register pressure.

:func:`analyze_function` runs them all on one function and bundles the results; the allocators
and the ``analyze`` command both start from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..ir.cfg import CFG
from ..ir.module import Function
from ..target.occupancy import block_size
from ..target.sm import SMProfile
from . import calls
from .costs import memory_latency, spill_costs
from .interference import InterferenceGraph
from .liveness import Liveness
from .pressure import Pressure
from .tuples import TupleInfo, find_tuples


@dataclass
class FunctionAnalysis:
    """Every analysis of one function as it stands in one round of allocation: its CFG,
    liveness, register tuples, interference graph, register pressure, memory latency and the
    spill cost of each register (``costs``, which the calling convention may still scale)."""

    fn: Function
    cfg: CFG
    liveness: Liveness
    tuples: TupleInfo
    graph: InterferenceGraph
    pressure: Pressure
    mem_latency: float
    costs: list[float]

    @cached_property
    def live_across_calls(self) -> dict[int, int]:
        """Per call (by its index in ``cfg.instrs``) the registers live across it
        (:func:`ptxalloc.analysis.calls.live_across_calls`), computed once."""
        return calls.live_across_calls(self.cfg, self.liveness)

    @cached_property
    def across_calls(self) -> int:
        """The bitset of registers live across some call."""
        across = 0
        for live in self.live_across_calls.values():
            across |= live
        return across


def analyze_function(fn: Function, sm: SMProfile, remat: dict[int, float] | None = None,
                     no_spill: set[int] | frozenset[int] = frozenset()) -> FunctionAnalysis:
    """Run every analysis on ``fn``: ``remat`` gives rematerializable registers their
    recomputation cost, ``no_spill`` registers get an infinite spill cost."""
    cfg = CFG(fn)
    liveness = Liveness(cfg)
    tuples = find_tuples(fn, cfg.instrs)
    graph = InterferenceGraph(cfg, liveness)
    pressure = Pressure(cfg, liveness, tuples)
    latency = memory_latency(sm, pressure.max_regs, block_size(fn.directives))
    costs = spill_costs(cfg, liveness, latency, remat, no_spill)
    return FunctionAnalysis(fn, cfg, liveness, tuples, graph, pressure, latency, costs)


def pressure_of(fn: Function) -> Pressure:
    """The register pressure of ``fn`` as it stands (no interference graph, no costs): what
    ``analyze`` reports as MaxLive, and what ``--registers auto`` starts from."""
    cfg = CFG(fn)
    return Pressure(cfg, Liveness(cfg), find_tuples(fn, cfg.instrs))


__all__ = ["FunctionAnalysis", "analyze_function", "pressure_of", "CFG", "Liveness", "InterferenceGraph",
           "Pressure", "find_tuples", "spill_costs"]
