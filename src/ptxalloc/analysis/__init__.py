"""Analyses that drive allocation: liveness, interference, spill costs, register pressure.

:func:`analyze_function` runs them all on one function and bundles the results; the allocators
and the ``analyze`` command both start from it.
"""

from __future__ import annotations

from operator import is_

from ..ir.cfg import CFG
from ..ir.module import Function
from ..target.occupancy import block_size
from ..target.sm import SMProfile
from . import calls
from .costs import cost_terms, costs_from_terms, memory_latency, spill_costs
from .interference import InterferenceGraph
from .liveness import Liveness
from .pressure import Pressure
from .tuples import TupleInfo, find_tuples


class FunctionAnalysis:
    """Every analysis of one function as it stands in one round of allocation: its CFG,
    liveness, register tuples, interference graph, register pressure, memory latency and the
    spill cost of each register (``costs``, which the calling convention may still scale).
    The interference graph, the costs and the values live across calls are computed on first
    use, so that a caller that reads none of them (pressure-only figures, the spill
    explanations) does not pay for them."""

    __slots__ = ("fn", "cfg", "liveness", "tuples", "_graph", "pressure", "mem_latency",
                 "_costs", "_cost_inputs", "_cost_terms", "_live_across_calls",
                 "_across_calls")

    def __init__(self, fn: Function, cfg: CFG, liveness: Liveness, tuples: TupleInfo,
                 graph: InterferenceGraph | None, pressure: Pressure, mem_latency: float,
                 costs: list[float] | None = None, remat: dict[int, float] | None = None,
                 no_spill: set[int] | frozenset[int] = frozenset()):
        self.fn = fn
        self.cfg = cfg
        self.liveness = liveness
        self.tuples = tuples
        self._graph = graph
        self.pressure = pressure
        self.mem_latency = mem_latency
        self._costs = costs
        self._cost_terms: tuple | None = None
        self._live_across_calls: dict[int, int] | None = None
        self._across_calls: int | None = None
        # copies: the costs are those of the inputs as they are now, whenever they are read
        self._cost_inputs = (None if remat is None else dict(remat), frozenset(no_spill))

    def with_remat(self, remat: dict[int, float]) -> "FunctionAnalysis":
        """The same function's analyses with other recomputation costs: the CFG, liveness,
        tuples, pressure and interference graph (none depends on them) shared, the costs
        computed anew on first use."""
        return FunctionAnalysis(self.fn, self.cfg, self.liveness, self.tuples, self._graph,
                                self.pressure, self.mem_latency, remat=remat,
                                no_spill=self._cost_inputs[1])

    @property
    def graph(self) -> InterferenceGraph:
        """The interference graph (built on first use)."""
        if self._graph is None:
            self._graph = InterferenceGraph(self.cfg, self.liveness)
        return self._graph

    @property
    def costs(self) -> list[float]:
        """The spill cost of each register (computed on first use)."""
        if self._costs is None:
            self._costs = self.costs_from(self.cost_terms)
        return self._costs

    def costs_from(self, terms: tuple[list[float], ...],
                   values: list[int] | None = None) -> list[float] | dict[int, float]:
        """The costs as :attr:`costs` has them (this analysis's rematerialization and no-spill
        inputs) from ``terms`` (:func:`~ptxalloc.analysis.costs.cost_terms`), of every
        register or, as a dict, of ``values`` (a report's few)."""
        remat, no_spill = self._cost_inputs
        return costs_from_terms(terms, self.mem_latency, remat, no_spill, values)

    @property
    def cost_terms(self) -> tuple[list[float], ...]:
        """The terms of the spill-cost formula that depend on the function alone
        (:func:`ptxalloc.analysis.costs.cost_terms`), computed once: costs under other
        rematerialization inputs reuse them."""
        if self._cost_terms is None:
            self._cost_terms = cost_terms(self.cfg, self.liveness)
        return self._cost_terms

    @property
    def live_across_calls(self) -> dict[int, int]:
        """Per call (by its index in ``cfg.instrs``) the registers live across it
        (:func:`ptxalloc.analysis.calls.live_across_calls`), computed once."""
        if self._live_across_calls is None:
            self._live_across_calls = calls.live_across_calls(self.cfg, self.liveness)
        return self._live_across_calls

    @property
    def across_calls(self) -> int:
        """The bitset of registers live across some call (computed once)."""
        if self._across_calls is None:
            across = 0
            for live in self.live_across_calls.values():
                across |= live
            self._across_calls = across
        return self._across_calls


def analyze_function(fn: Function, sm: SMProfile, remat: dict[int, float] | None = None,
                     no_spill: set[int] | frozenset[int] = frozenset(),
                     uniform: int = 0) -> FunctionAnalysis:
    """The analyses of ``fn`` (the interference graph, costs and calls on first use): ``remat``
    gives rematerializable registers their recomputation cost, ``no_spill`` registers get an
    infinite spill cost, the registers of the bitset ``uniform`` (placed in the uniform files)
    count in no pressure of R or P."""
    cfg = CFG(fn)
    liveness = Liveness(cfg)
    tuples = find_tuples(fn, cfg.instrs)
    pressure = Pressure(cfg, liveness, tuples, uniform)
    latency = memory_latency(sm, pressure.max_regs, block_size(fn.directives))
    return FunctionAnalysis(fn, cfg, liveness, tuples, None, pressure, latency,
                            remat=remat, no_spill=no_spill)


def pressure_of(fn: Function, exclude: int = 0) -> Pressure:
    """The register pressure of ``fn`` as it stands (no interference graph, no costs): what
    ``analyze`` reports as MaxLive, and what ``--registers auto`` starts from; the registers
    of the bitset ``exclude`` (those in the uniform files) are counted in neither R nor P.
    Asked again of the same, unchanged function (:func:`remember_pressure`), the answer is
    the one found before."""
    pressure = remembered_pressure(fn, exclude)
    if pressure is not None:
        return pressure
    cfg = CFG(fn)
    pressure = Pressure(cfg, Liveness(cfg), find_tuples(fn, cfg.instrs), exclude)
    remember_pressure(fn, pressure, exclude)
    return pressure


def remembered_pressure(fn: Function, exclude: int = 0) -> Pressure | None:
    """The pressure :func:`pressure_of` found before for ``fn`` as it stands now (the very same
    statements and registers), or None."""
    got = _pressures.get((id(fn), exclude))
    if got is not None:
        known, body, nregs, pressure = got
        if known is fn and nregs == len(fn.regs) and len(body) == len(fn.body) and \
                all(map(is_, body, fn.body)):
            return pressure
    return None


_pressures: dict = {}       # (id(fn), exclude) -> (fn, its body's statements, registers, Pressure)
PRESSURES_REMEMBERED = 8


def remember_pressure(fn: Function, pressure: Pressure, exclude: int = 0) -> None:
    """Keep ``pressure`` (of ``fn`` as it stands now) for :func:`pressure_of`. The pre-passes
    and the driver ask the pressure of one function several times — the recomputation's
    result again in the schedule, the function as written again for the report (issue 16:
    a fifth of the pressure walks on renderer.ptx) — while a pass that changes a function
    makes a new one, or new statements: the entry is used only while the function holds the
    very same statements and registers. A statement is never changed in place (``copy_with``)."""
    if len(_pressures) >= PRESSURES_REMEMBERED:
        del _pressures[next(iter(_pressures))]
    _pressures[(id(fn), exclude)] = (fn, tuple(fn.body), len(fn.regs), pressure)


__all__ = ["FunctionAnalysis", "analyze_function", "pressure_of", "remember_pressure",
           "remembered_pressure", "CFG",
           "Liveness", "InterferenceGraph", "Pressure", "find_tuples", "spill_costs"]
