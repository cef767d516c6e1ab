"""The register limit ptxas gives a function when no budget is asked for: the default budget of
``ptxalloc allocate`` (issue 20; not a seed rule — the seeds' CICC constant K = 15 is
``--registers seed``).

Measured with CUDA 13.0's ptxas on sm_75, sm_80, sm_86 and sm_90 (tests/unit/test_budget_rule.py
checks it against ptxas itself):

* no directive: the per-thread limit, 255 registers (R0..R254);
* ``.maxnreg N``: N (above 255 ignored, below 24 raised to 24 — ptxas warns of both);
* ``.maxntid``/``.reqntid`` T (the product of its dimensions), with ``.minnctapersm B`` (else
  1): the blocks must fit the register file together. Their warps, ceil(T / 32) x B, are rounded
  up to the 4 warp-allocation sub-partitions, and the registers per thread that fit —
  65536 / (warps x 32) — are rounded down to the allocation unit of 8 registers per thread:
  ``.reqntid 128`` + ``.minnctapersm 3`` gives 170.6 -> 168, ``.maxntid 800`` 28 warps -> 72.
  ``.minnctapersm`` is ignored without a thread bound, above the target's blocks per SM, and
  where T x B exceeds its threads per SM (ptxas warns "out of range");
* ``.maxnreg`` together with a thread bound: the smaller;
* ``-maxrregcount N`` (same bounds as ``.maxnreg``): the limit of a function with none of the
  three directives; a function with any keeps its directives' limit ("the directive wins"),
  unless ``--override-directive-values``, which makes N the limit whatever the directives say;
* a ``.func`` gets the limit of the kernels that call it, directly or through other functions
  (the smallest when several do); a ``.func`` no kernel reaches gets the per-thread limit or
  ``-maxrregcount``.

This is ptxas's *limit*. Under launch bounds without ``.minnctapersm`` ptxas sometimes uses fewer
registers than the limit, trading spills for occupancy (``.maxntid 640`` on sm_80: 32 of 96 on a
kernel that needs 240); ptxalloc allocates to the limit (``--registers auto`` makes a choice of
that kind, seed 004's).
"""

from __future__ import annotations

import math

from ..records import record
from .occupancy import launch_threads
from .sm import REG_ALLOC_UNIT, SUB_PARTITIONS, SMProfile

GRANULE = REG_ALLOC_UNIT // 32      # registers per thread in one allocation unit: 8
MIN_REGS = 24                       # ptxas: "adjusting per thread register count ... to 24"
LIMIT_DIRECTIVES = ("maxnreg", "maxntid", "reqntid")


@record(frozen=True)
class RegisterLimit:
    registers: int
    source: str         # why: the report's ``budget_from``


def _scalar(value) -> int:
    return int(value[0] if isinstance(value, list) else value)


def threads_limit(sm: SMProfile, threads: int, blocks: int = 1) -> int:
    """Registers per thread that let ``blocks`` blocks of ``threads`` threads share one SM."""
    warps = math.ceil(threads / 32) * blocks
    warps = math.ceil(warps / SUB_PARTITIONS) * SUB_PARTITIONS
    regs = sm.regs_per_sm // (warps * 32)
    return min(sm.regs_per_thread, regs // GRANULE * GRANULE)


def _count(sm: SMProfile, n: int) -> int | None:
    """A register count from ``.maxnreg``/``-maxrregcount`` as ptxas takes it: None (ignored)
    above the per-thread limit, raised to 24 below it."""
    if n > sm.regs_per_thread or n < 1:
        return None
    return max(n, MIN_REGS)


def directive_limit(sm: SMProfile, directives: dict, maxrregcount: int | None = None,
                    override: bool = False) -> RegisterLimit:
    """ptxas's register limit for a function with these directives and flags (module
    docstring)."""
    default = RegisterLimit(sm.regs_per_thread,
                            f"ptxas default: {sm.regs_per_thread} per thread ({sm.name})")
    has_directive = any(directives.get(k) for k in LIMIT_DIRECTIVES)
    if maxrregcount is not None and (override or not has_directive):
        n = _count(sm, maxrregcount)
        if n is None:
            return RegisterLimit(default.registers, default.source
                                 + f"; -maxrregcount {maxrregcount} ignored (above "
                                 f"{sm.regs_per_thread})")
        flag = " --override-directive-values" if override and has_directive else ""
        return RegisterLimit(n, f"-maxrregcount {maxrregcount}{flag}"
                             + (f" (raised to {MIN_REGS})" if n != maxrregcount else ""))
    limit = default
    bound = launch_threads(directives)
    if bound is not None:
        key, threads = bound
        blocks = directives.get("minnctapersm")
        blocks = _scalar(blocks) if blocks and blocks is not True else None
        if blocks is not None and (blocks > sm.max_blocks
                                   or threads * blocks > sm.max_threads):
            blocks = None            # ptxas: "out of range. .minnctapersm will be ignored"
        r = threads_limit(sm, threads, blocks or 1)
        if r < limit.registers:
            if blocks is not None:
                why = f".minnctapersm {blocks} x .{key} {threads}"
            else:
                why = f".{key} {threads}: {math.ceil(threads / 32)} warps"
            limit = RegisterLimit(r, why)
    maxnreg = directives.get("maxnreg")
    if maxnreg and maxnreg is not True:
        n = _count(sm, _scalar(maxnreg))
        if n is not None and n < limit.registers:
            limit = RegisterLimit(n, f".maxnreg {_scalar(maxnreg)}"
                                  + (f" (raised to {MIN_REGS})" if n != _scalar(maxnreg)
                                     else ""))
    if maxrregcount is not None:
        limit = RegisterLimit(limit.registers, limit.source + f"; -maxrregcount "
                              f"{maxrregcount} ignored: the directives win")
    return limit


def callees(fn, names: set[str]) -> set[str]:
    """The functions of ``names`` that ``fn`` calls directly."""
    out = set()
    for ins in fn.instructions():
        if ins.base == "call":
            out.update(op.text for op in ins.ops if getattr(op, "text", None) in names)
    return out


def module_limits(module, sm: SMProfile, maxrregcount: int | None = None,
                  override: bool = False) -> dict[str, RegisterLimit]:
    """Every function's limit: kernels by their directives, a ``.func`` by the kernels that
    reach it through calls (module docstring)."""
    fns = module.functions
    names = {f.name for f in fns}
    calls = {f.name: callees(f, names) for f in fns}
    limits: dict[str, RegisterLimit] = {}
    reached: dict[str, RegisterLimit] = {}
    for f in fns:
        if f.kind != "entry":
            continue
        own = directive_limit(sm, f.directives, maxrregcount, override)
        limits[f.name] = own
        seen, stack = set(), list(calls[f.name])
        while stack:
            g = stack.pop()
            if g in seen:
                continue
            seen.add(g)
            stack.extend(calls.get(g, ()))
            if g not in reached or own.registers < reached[g].registers:
                reached[g] = RegisterLimit(own.registers, f"called from kernel {f.name}")
    for f in fns:
        if f.name not in limits:
            limits[f.name] = reached.get(f.name) or directive_limit(sm, {}, maxrregcount,
                                                                    override)
    return limits


SEED_K = 15                 # CICC's register budget constant (seed 000)


def fixed_budgets(module, sm: SMProfile, registers, maxrregcount: int | None = None,
                  override_directive_values: bool = False) -> dict[str, RegisterLimit]:
    """Every function's budget and its source, for every ``registers`` but 'auto' (whose
    budgets are these limits, lowered per function by seed 004's model)."""
    if registers is None or registers == "auto":
        return module_limits(module, sm, maxrregcount, override_directive_values)
    why = "--registers seed (CICC's K = 15)" if registers == "seed" else f"--registers {registers}"
    k = SEED_K if registers == "seed" else registers
    return {fn.name: RegisterLimit(k, why) for fn in module.functions}
