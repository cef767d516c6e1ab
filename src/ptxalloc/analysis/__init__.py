"""Analyses that drive allocation: liveness, interference, spill costs, register pressure.

:func:`analyze_function` runs them all on one function and bundles the results; the allocators
and the ``analyze`` command both start from it.
"""

from __future__ import annotations

from ..ir.cfg import CFG
from ..ir.module import Function
from ..target.occupancy import block_size
from ..target.sm import SMProfile
from .costs import memory_latency, spill_costs
from .interference import InterferenceGraph
from .liveness import Liveness
from .pressure import Pressure
from .tuples import TupleInfo, find_tuples


class FunctionAnalysis:
    """The analyses of one function. ``costs`` (the spill costs, which only allocators read)
    are computed on first use, so that the ``analyze`` command does not pay for them."""

    __slots__ = ("fn", "cfg", "liveness", "tuples", "graph", "pressure", "mem_latency",
                 "_costs", "_cost_inputs")

    def __init__(self, fn: Function, cfg: CFG, liveness: Liveness, tuples: TupleInfo,
                 graph: InterferenceGraph, pressure: Pressure, mem_latency: float,
                 costs: list[float] | None = None, remat: dict[int, float] | None = None,
                 no_spill: set[int] | frozenset[int] = frozenset()):
        self.fn = fn
        self.cfg = cfg
        self.liveness = liveness
        self.tuples = tuples
        self.graph = graph
        self.pressure = pressure
        self.mem_latency = mem_latency
        self._costs = costs
        # copies: the costs are those of the inputs as they are now, whenever they are read
        self._cost_inputs = (None if remat is None else dict(remat), frozenset(no_spill))

    @property
    def costs(self) -> list[float]:
        if self._costs is None:
            remat, no_spill = self._cost_inputs
            self._costs = spill_costs(self.cfg, self.liveness, self.mem_latency, remat, no_spill)
        return self._costs


def analyze_function(fn: Function, sm: SMProfile, remat: dict[int, float] | None = None,
                     no_spill: set[int] | frozenset[int] = frozenset()) -> FunctionAnalysis:
    cfg = CFG(fn)
    liveness = Liveness(cfg)
    tuples = find_tuples(fn, cfg.instrs)
    graph = InterferenceGraph(cfg, liveness)
    pressure = Pressure(cfg, liveness, tuples)
    latency = memory_latency(sm, pressure.max_regs, block_size(fn.directives))
    return FunctionAnalysis(fn, cfg, liveness, tuples, graph, pressure, latency,
                            remat=remat, no_spill=no_spill)


__all__ = ["FunctionAnalysis", "analyze_function", "CFG", "Liveness", "InterferenceGraph",
           "Pressure", "find_tuples", "spill_costs"]
