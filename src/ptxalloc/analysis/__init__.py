"""Analyses that drive allocation: liveness, interference, spill costs, register pressure.

:func:`analyze_function` runs them all on one function and bundles the results; the allocators
and the ``analyze`` command both start from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.cfg import CFG
from ..ir.module import Function
from ..target.occupancy import block_size
from ..target.sm import SMProfile
from .costs import memory_latency, spill_costs
from .interference import InterferenceGraph
from .liveness import Liveness
from .pressure import Pressure
from .tuples import TupleInfo, find_tuples


@dataclass
class FunctionAnalysis:
    fn: Function
    cfg: CFG
    liveness: Liveness
    tuples: TupleInfo
    graph: InterferenceGraph
    pressure: Pressure
    mem_latency: float
    costs: list[float]


def analyze_function(fn: Function, sm: SMProfile, remat: dict[int, float] | None = None,
                     no_spill: set[int] | frozenset[int] = frozenset()) -> FunctionAnalysis:
    cfg = CFG(fn)
    liveness = Liveness(cfg)
    tuples = find_tuples(fn, cfg.instrs)
    graph = InterferenceGraph(cfg, liveness)
    pressure = Pressure(cfg, liveness, tuples)
    latency = memory_latency(sm, pressure.max_regs, block_size(fn.directives))
    costs = spill_costs(cfg, liveness, latency, remat, no_spill)
    return FunctionAnalysis(fn, cfg, liveness, tuples, graph, pressure, latency, costs)


__all__ = ["FunctionAnalysis", "analyze_function", "CFG", "Liveness", "InterferenceGraph",
           "Pressure", "find_tuples", "spill_costs"]
