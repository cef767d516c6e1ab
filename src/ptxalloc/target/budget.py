"""The occupancy-aware register budget, ``--registers auto`` (seed 004 "Budget Pressure Model",
"Piecewise Budget Fraction Evaluation", the needs-spill test of sub_937E90, and the occupancy
formula of sub_A99FE0; SPEC section 6).

Three pieces of the seed, and how ptxalloc puts them together (decisions, docs/decisions.md
"Fat-point allocator: the register budget"):

**Occupancy.** ``max_warps(regs)``: the warps one SM can hold when each thread uses ``regs``
registers — the CUDA Occupancy Calculator's count (:func:`occupancy.warps_by_registers`: 256
registers per warp, 4 sub-partitions) capped by the target's warps per SM, less ``warp_offset``.
The seed writes ``(-granularity_mask & (2 * half_reg_file_size / regs)) - warp_offset``; taken
literally it gives 0 warps for 64 registers (``-63 & 4``), so the mask is read as the rounding
of the register count to its granule — the rule of the occupancy calculator — and
``warp_offset`` as 0. The figures are the hardware's (:mod:`sm`), not the seeds' register file.

**The budget fraction.** The seed's piecewise-linear table over a register count ``x``:
(x0, A) - (max threads, A) - (pressure threshold, A) - (255, B), flat outside, with A = 0.2,
B = 1.0, max threads 119 and threshold 160 (knobs ``RegTgtCoeffA``, ``RegTgtCoeffB``,
``RegTgtMaxThreads``, ``RegTgtPressureThreshold``). x0 comes from a profile callback the seed
does not decode; it is taken as 0 (with the three first points all at A it changes nothing).
The linear occupancy model beside it (+1720..+1736) rises from C = 0.3 (``RegTgtCoeffC``) at the
lowest occupancy to B at the highest.

**The needs-spill test.** ``(pair_penalty + demanded + live_count) > (range + 1) x fraction``.
ptxalloc reads it as the test of one step down the occupancy ladder: lowering the target from T
to the next occupancy cliff T1 (the largest register count that buys more warps) *needs spill*
— is refused — when the registers the function would have to give up, ``pair_penalty +
(MaxLive - T1) + live_count``, exceed ``(T1 + 1) x fraction(MaxLive) x weight(T1)``: the budget
fraction of the pressure, scaled by the linear model at T1's occupancy. A function with little
pressure is allowed to spill little (20 % of the target); above the pressure threshold, where
occupancy is at its lowest, the allowance rises toward the whole target.

``auto`` then: starts at the top of the occupancy step that holds MaxLive (registers below the
next cliff cost no occupancy), capped by ptxas's register limit for the function
(:mod:`register_limit`: ``.maxnreg``, launch bounds, ``-maxrregcount``); steps down one
cliff at a time while the step does not need spill; and never goes below the registers one
instruction needs. The report says which steps it took and why it stopped.

``pair_penalty`` is 1 when a 64-bit or wider value is live at the pressure peak and MaxLive is
odd (its alignment can cost a register); ``live_count`` — the seed's registers held live by
the ABI — is 0 until the calling convention reserves any.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .occupancy import warps_by_registers
from .register_limit import RegisterLimit, directive_limit
from .sm import MAX_REGS_PER_THREAD as MAX_REGS
from .sm import SMProfile


@dataclass(frozen=True)
class BudgetModel:
    coeff_a: float = 0.2
    coeff_b: float = 1.0
    coeff_c: float = 0.3
    max_threads: float = 119
    threshold: float = 160
    x0: float = 0.0
    top: float = 255.0

    @classmethod
    def from_knobs(cls, knobs: dict[str, float]) -> "BudgetModel":
        return cls(coeff_a=knobs["RegTgtCoeffA"], coeff_b=knobs["RegTgtCoeffB"],
                   coeff_c=knobs["RegTgtCoeffC"], max_threads=knobs["RegTgtMaxThreads"],
                   threshold=knobs["RegTgtPressureThreshold"])


def _segment(y0: float, y1: float, x0: float, x1: float, x: float) -> float:
    if x1 <= x0:
        return y1
    return y0 + (y1 - y0) / (x1 - x0) * (x - x0)


def budget_fraction(model: BudgetModel, x: float) -> float:
    """The seed's piecewise-linear budget fraction at register count ``x``."""
    xs = [model.x0, model.max_threads, model.threshold, model.top]
    ys = [model.coeff_a, model.coeff_a, model.coeff_a, model.coeff_b]
    for i in range(1, len(xs)):           # keep the breakpoints ascending whatever the knobs
        xs[i] = max(xs[i], xs[i - 1])
    if x < xs[0]:
        return ys[0]
    for i in range(1, 4):
        if x < xs[i]:
            return _segment(ys[i - 1], ys[i], xs[i - 1], xs[i], x)
    return ys[3]


def max_warps(sm: SMProfile, regs: int, warp_offset: int = 0) -> int:
    """Warps per SM that ``regs`` registers per thread allow (module docstring)."""
    return max(0, min(sm.max_warps, warps_by_registers(sm, regs)) - warp_offset)


def occupancy_weight(model: BudgetModel, sm: SMProfile, warps: int) -> float:
    """The seed's linear model: C at the lowest occupancy (255 registers), B at the highest."""
    lo = max_warps(sm, MAX_REGS)
    hi = sm.max_warps
    if hi <= lo:
        return model.coeff_b
    return model.coeff_c + (model.coeff_b - model.coeff_c) / (hi - lo) * (warps - lo)


def launch_limit(sm: SMProfile, directives: dict) -> tuple[int, str]:
    """The register limit the function's directives impose (ptxas's rule), and why."""
    limit = directive_limit(sm, directives)
    return limit.registers, limit.source


def next_cliff(sm: SMProfile, target: int, floor: int) -> int | None:
    """The largest register count below ``target`` (and at least ``floor``) that allows more
    warps than ``target`` does; None when there is none."""
    w = max_warps(sm, target)
    r = target - 1
    while r >= max(floor, 1):
        if max_warps(sm, r) > w:
            return r
        r -= 1
    return None


@dataclass
class Budget:
    registers: int
    reason: str
    steps: list[str] = field(default_factory=list)


def choose_budget(sm: SMProfile, directives: dict, max_live: int, pair_penalty: int,
                  live_count: int, floor: int, knobs: dict[str, float],
                  limit: RegisterLimit | None = None,
                  occupancy_target: float | None = None) -> Budget:
    """The register target ``--registers auto`` picks (module docstring), below ``limit``
    (default: ptxas's limit for ``directives``); with ``occupancy_target`` (percent), the
    target occupancy decides instead of the needs-spill test (:func:`for_occupancy`)."""
    model = BudgetModel.from_knobs(knobs)
    limit = limit or directive_limit(sm, directives)
    limit, why = limit.registers, f"{limit.registers} ({limit.source})"
    floor = max(1, min(floor, limit))
    demand = pair_penalty + max_live + live_count
    head = (f"auto: MaxLive {max_live}" + (f" + {pair_penalty} pair" if pair_penalty else "")
            + (f" + {live_count} ABI" if live_count else "") + f", limit {why}")
    # the top of the occupancy step holding the demand
    w = max_warps(sm, demand)
    target = min(demand, limit)
    while target < limit and max_warps(sm, target + 1) == w:
        target += 1
    target = max(target, floor)
    if occupancy_target is not None:
        return for_occupancy(sm, directives, target, floor, occupancy_target, head)
    if demand >= limit:
        return Budget(limit, f"{head}; demand {demand} >= limit: budget {limit}")
    frac = budget_fraction(model, demand)
    steps = [f"{target} regs -> {max_warps(sm, target)} warps"]
    stop = "no higher occupancy to reach"
    while True:
        t1 = next_cliff(sm, target, floor)
        if t1 is None:
            break
        w1 = max_warps(sm, t1)
        give = demand - t1
        allowance = (t1 + 1) * frac * occupancy_weight(model, sm, w1)
        if give > allowance:
            stop = (f"{t1} regs ({w1} warps) needs spill: {give} > {allowance:.1f} "
                    f"= ({t1}+1) x {frac:.2f} x {occupancy_weight(model, sm, w1):.2f}")
            break
        steps.append(f"{t1} regs -> {w1} warps (gives up {max(give, 0)} <= {allowance:.1f})")
        target = t1
    reason = f"{head}; " + ", ".join(steps) + f"; stop: {stop}; budget {target}"
    return Budget(target, reason, steps)


def for_occupancy(sm: SMProfile, directives: dict, top: int, floor: int, percent: float,
                  head: str) -> Budget:
    """``--occupancy-target PCT`` (seed 001's ``-nvptx-regalloc-occupancy-target``): the most
    registers, at most ``top`` (the top of MaxLive's occupancy step, under the limit), whose
    occupancy at the launch bound's block size (else 256; :mod:`occupancy`) reaches
    ``percent``; never below ``floor``, the registers one instruction needs (then the target
    is out of reach and the reason says so)."""
    from .occupancy import block_size, occupancy

    block = block_size(directives)
    r = top
    while r > floor and occupancy(sm, r, block).fraction * 100 < percent:
        r -= 1
    got = occupancy(sm, r, block).fraction * 100
    verdict = "reached" if got >= percent else f"out of reach above {floor} registers"
    return Budget(r, f"{head}; occupancy target {percent:g} % at {block} threads: {r} regs -> "
                     f"{got:.1f} % ({verdict}); budget {r}")
