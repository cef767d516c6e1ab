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
    return costs_from_terms(cfg.fn, cost_terms(cfg, liveness), mem_latency, remat, no_spill)


def cost_terms(cfg: CFG, liveness: Liveness) -> tuple[list[float], list[float], list[float]]:
    """Per register, the terms of the formula that depend on the function alone: definition
    frequency, use frequency and the average loop multiplier. Costs under other ``remat``
    inputs (``analyze`` wants them with and without rematerialization) reuse them."""
    fn = cfg.fn
    n = len(fn.regs)
    def_freq = [0.0] * n
    use_freq = [0.0] * n
    loop_sum = [0.0] * n
    freq_sum = [0.0] * n
    for b in cfg.blocks:
        f = b.freq
        mention = liveness.live_in[b.id] | liveness.live_out[b.id]
        for ins in b.instrs:
            for d in ins.defs:
                def_freq[d] += f
                mention |= 1 << d
            for u in ins.uses:
                use_freq[u] += f
                mention |= 1 << u
        if f > 0.0:
            w = f * LOOP_DEPTH_BASE ** b.depth
            for v in bits(mention):
                loop_sum[v] += w
                freq_sum[v] += f
    mult = [loop_sum[v] / freq_sum[v] if freq_sum[v] > 0.0 else 1.0 for v in range(n)]
    return def_freq, use_freq, mult


def costs_from_terms(fn, terms: tuple[list[float], list[float], list[float]],
                     mem_latency: float, remat: dict[int, float] | None = None,
                     no_spill: set[int] | frozenset[int] = frozenset()) -> list[float]:
    """The spill cost of every register of ``fn`` from its :func:`cost_terms`."""
    def_freq, use_freq, mults = terms
    classes = fn.regs.classes
    vec = fn.regs.vec
    costs = [0.0] * len(def_freq)
    for v, mult in enumerate(mults):
        if remat is not None and v in remat:
            c = use_freq[v] * remat[v] * mult
        else:
            c = def_freq[v] * use_freq[v] * mem_latency * mult
        if classes[v] in (RegClass.GPR64, RegClass.B128) or vec[v] > 1:
            c *= WIDE_FACTOR
        costs[v] = min(max(c, 0.0), MAX_COST)
    for v in no_spill:
        costs[v] = INFINITE
    return costs
