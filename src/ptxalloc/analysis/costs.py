"""Spill costs (seed 002 "Spill Cost Formula — Deep Dive"; SPEC section 4.5; seed 003 class
factor).

    cost(v) = def_freq(v) x use_freq(v) x mem_latency x avg_loop_mult(v)     clamped to [0, 1e9]

* ``def_freq``/``use_freq``: the instructions defining/using ``v``, each weighted by the static
  frequency of its block (:mod:`ptxalloc.ir.cfg`: back edges 90 %, other branches 50/50).
* ``mem_latency``: from the working-set estimate — MaxLive registers x 4 bytes x threads per
  block — against the SM's cache sizes: within L1 the L1 latency (4 cycles), within L2 the L2
  latency (10), beyond it the "L3/main" latency of seed 002's SM table (100 up to SM 80, 40 from
  SM 90).
* ``avg_loop_mult``: the frequency-weighted average of 1.5^depth over the blocks where ``v`` is
  live (defined, used, live in or live out).
* 64-bit values (and wider) cost 1.2 times more (seed 003 "register_class_factor").

A value defined but never used, or used but never defined (live on entry), costs 0: spilling it
costs nothing. Rematerializable values cost what recomputing them costs (computed by the spiller,
:mod:`ptxalloc.spill.remat`, and passed in). Temporaries created by spilling cost infinity and are
never spilled again.
"""

from __future__ import annotations

import math

from ..ir.cfg import CFG
from ..ir.registers import RegClass
from ..target.sm import SMProfile
from ..util import bits
from .liveness import Liveness

LOOP_DEPTH_BASE = 1.5
MAX_COST = 1e9
WIDE_FACTOR = 1.2
INFINITE = math.inf


def memory_latency(sm: SMProfile, max_live_regs: float, threads_per_block: int) -> float:
    """Latency of a spill access from the working-set estimate (seed 002
    ``estimate_memory_latency``)."""
    working_set = max_live_regs * 4 * threads_per_block
    if working_set > sm.l1_bytes:
        if working_set > sm.l2_bytes:
            return sm.latency_l3
        return sm.latency_l2
    return sm.latency_l1


def spill_costs(cfg: CFG, liveness: Liveness, mem_latency: float,
                remat: dict[int, float] | None = None,
                no_spill: set[int] | frozenset[int] = frozenset()) -> list[float]:
    """Spill cost of every virtual register of the function."""
    return costs_from_terms(cost_terms(cfg, liveness), mem_latency, remat, no_spill)


def cost_terms(cfg: CFG, liveness: Liveness, want: int = -1) -> tuple[list[float], ...]:
    """Per register, the terms of the formula that depend on the function alone: definition
    frequency, use frequency, the average loop multiplier and the class factor (1.0 or
    ``WIDE_FACTOR``). Costs under other ``remat`` inputs (``analyze`` wants them with and
    without rematerialization) reuse them. The loop multiplier (a walk over every value live in
    every block) is found for the registers of the bitset ``want`` only (default: all), and
    only the blocks that read or define one are walked: the others' terms are 0.0 and 1.0,
    so their costs mean nothing."""
    fn = cfg.fn
    n = len(fn.regs)
    def_freq = [0.0] * n
    use_freq = [0.0] * n
    loop_sum = [0.0] * n
    freq_sum = [0.0] * n
    # the registers each block reads or defines (no bit set per operand): a block that reads
    # and defines none of ``want``'s registers adds nothing to their frequencies
    references = liveness.references
    live_in = liveness.live_in
    live_out = liveness.live_out
    for b in cfg.blocks:
        f = b.freq
        refs = references[b.id]
        if refs & want:
            for ins in b.instrs:
                for d in ins.defs:
                    def_freq[d] += f
                for u in ins.uses:
                    use_freq[u] += f
        if f > 0.0:
            w = f * LOOP_DEPTH_BASE ** b.depth
            for v in bits((live_in[b.id] | live_out[b.id] | refs) & want):
                loop_sum[v] += w
                freq_sum[v] += f
    mult = [s / f if f > 0.0 else 1.0 for s, f in zip(loop_sum, freq_sum)]
    wide = (RegClass.GPR64, RegClass.B128)
    factor = [WIDE_FACTOR if c in wide or k > 1 else 1.0
              for c, k in zip(fn.regs.classes, fn.regs.vec)]
    return def_freq, use_freq, mult, factor


def costs_from_terms(terms: tuple[list[float], ...], mem_latency: float,
                     remat: dict[int, float] | None = None,
                     no_spill: set[int] | frozenset[int] = frozenset(),
                     values: list[int] | None = None) -> list[float] | dict[int, float]:
    """The spill cost of every register from the function's :func:`cost_terms` (a factor of
    1.0 multiplies exactly: the costs are those of the formula as written); with ``values``,
    of those registers only, as a dict (a report shows a few)."""
    def_freq, use_freq, mults, factors = terms
    if values is None:
        costs = [min(max(d * u * mem_latency * m * k, 0.0), MAX_COST)
                 for d, u, m, k in zip(def_freq, use_freq, mults, factors)]
    else:
        costs = {v: min(max(def_freq[v] * use_freq[v] * mem_latency * mults[v] * factors[v],
                            0.0), MAX_COST) for v in values}
    if remat:
        for v, r in remat.items():
            if values is None or v in costs:
                costs[v] = min(max(use_freq[v] * r * mults[v] * factors[v], 0.0), MAX_COST)
    for v in no_spill:
        if values is None or v in costs:
            costs[v] = INFINITE
    return costs
