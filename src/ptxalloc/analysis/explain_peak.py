"""What is live at the pressure peak and what to change (seed 002 "Register Allocation
Statistics" and "Spill Cost Formula"; seed 004's occupancy model; SPEC section 9).

:func:`peak_values` describes every general-register value live at the peak: where it is defined
(PTX and source line), how many instructions it is live across, how far its next use is from
the peak, its spill cost (seed 002's formula, :mod:`ptxalloc.analysis.costs`), and whether it can
be rematerialized instead (:mod:`ptxalloc.spill.remat`: one definition from constants or fixed
special registers) with what that costs. :func:`group_by_source` groups them by the source line
that defines them.

:func:`what_to_change` answers "how do I get the next occupancy step": for the block size (the
launch bounds, or the one given), the occupancy at MaxLive now, the register count of the next
step up, and a cheapest set of values to rematerialize or spill so that no instruction needs
more: a greedy cover of every instruction above the target, by registers freed per unit of
cost. It is an estimate from liveness (a spilled value still occupies a register briefly at its
reloads); ``allocate`` decides.
"""

from __future__ import annotations

import heapq

from ..ir.registers import RegClass
from ..spill.remat import COMPUTE_COST, remat_candidates
from ..target.occupancy import occupancy
from ..util import bits
from .costs import cost_terms, costs_from_terms
from .sources import format_source, source_of


def remat_and_costs(a, want: int | None = None) -> tuple[dict, list | dict, list | dict]:
    """The function's rematerializable registers (with their definitions), the spill cost of
    every register when those are rematerialized instead of spilled, and the costs as
    ``a.costs`` has them. With the bitset ``want`` only its registers' costs are computed (in
    dicts by register): a report shows the costs of a few values, and the loop multipliers of
    every register were most of ``analyze``'s cost time (issue 16).
    :func:`peak_values` and :func:`what_to_change` share one (a register's cost depends on its
    own entry only)."""
    remat = remat_candidates(a.fn, a.cfg.instrs)
    if want is None:
        terms = a.cost_terms
        plain = a.costs
        values = None
    else:
        terms = cost_terms(a.cfg, a.liveness, want)
        values = bits(want)
        plain = a.costs_from(terms, values)
    costs = costs_from_terms(terms, a.mem_latency, {v: COMPUTE_COST for v in remat},
                             values=values) if remat else plain
    return remat, costs, plain


def peak_mask(a) -> int:
    """The bitset of the general-register values live at the pressure peak (those
    :func:`peak_values` describes)."""
    classes = a.fn.regs.classes
    mask = 0
    for v in a.pressure.peak.live:
        if classes[v] != RegClass.PRED:
            mask |= 1 << v
    return mask


def peak_values(a, files: dict[int, str], shared: tuple | None = None) -> list[dict]:
    """Every general-register value live at the peak, in order of definition; ``shared`` is
    :func:`remat_and_costs` of ``a`` when the caller has it."""
    cfg = a.cfg
    p = a.pressure
    fn = a.fn
    regs = fn.regs
    instrs = cfg.instrs
    peak_at = max(p.peak.instr, 0)
    live = [v for v in p.peak.live if regs.classes[v] != RegClass.PRED]
    want = 0
    for v in live:
        want |= 1 << v
    length = live_lengths(cfg, a.liveness, want)
    defs: dict[int, list[int]] = {v: [] for v in live}
    next_use: dict[int, int | None] = dict.fromkeys(live)
    last_use: dict[int, int] = dict.fromkeys(live, -1)
    # membership in a dict, not a shift of the bitset per operand (a big int each); only the
    # blocks that read or define one of the values
    for b in a.liveness.blocks_referencing(want):
        for i, ins in enumerate(b.instrs, b.first):
            for d in ins.defs:
                if d in defs:
                    defs[d].append(i)
            for u in ins.uses:
                if u in last_use:
                    last_use[u] = i
                    if i > peak_at and next_use[u] is None:
                        next_use[u] = i - peak_at
    all_remat, remat_costs, costs = shared or remat_and_costs(a, want)
    remat = {v: ins for v, ins in all_remat.items() if want >> v & 1}
    name = regs.names.__getitem__
    out = []
    for v in live:
        ds = defs[v]
        row = {
            "name": regs.names[v], "class": regs.classes[v].name,
            "registers": p.units[v] / 2,
            "defined_lines": [instrs[i].line for i in ds],
            "defined_source": [source_of(instrs[i].loc, files) for i in ds],
            "last_use_line": instrs[last_use[v]].line if last_use[v] >= 0 else 0,
            "live_instructions": length[v],
            "next_use_distance": next_use[v],
            "spill_cost": round(costs[v], 3),
            "rematerializable": v in remat,
        }
        if v in remat:
            row["remat_from"] = remat[v].render(name).replace("\t", " ")
            row["remat_cost"] = round(remat_costs[v], 3)
        out.append(row)
    out.sort(key=lambda r: (r["defined_lines"][:1] or [-1])[0])
    return out


def live_lengths(cfg, liveness, want: int) -> dict[int, int]:
    """For each register of the bitset ``want``, how many instructions it is live after or
    defined by. Counted per live segment (the instructions of one block from a definition or
    the block's start to the next use or the block's end), not instruction by instruction: a
    segment adds its length, a definition nothing reads its one instruction, and a value live
    through a run of consecutive blocks the run's length, once per run (a prefix sum of the
    block lengths) rather than once per block. Only the blocks that read or define one of
    them are walked."""
    length = dict.fromkeys(bits(want), 0)
    blocks = cfg.blocks
    # per block, the values live through it untouched: in a block that reads and defines none
    # of them, those live out
    through = [out & want for out in liveness.live_out]
    for b in liveness.blocks_referencing(want):
        instrs = b.instrs
        m = len(instrs)
        live = liveness.live_out[b.id] & want
        top: dict[int, int] = {}        # value -> last instruction of its open segment
        touched = 0                     # values whose segment is not the whole block
        for i in range(m - 1, -1, -1):
            ins = instrs[i]
            for d in ins.defs:
                if d in length:
                    if not live >> d & 1:
                        length[d] += 1          # defined, never read after
                    elif ins.guard < 0:         # the segment starts here
                        length[d] += top.pop(d, m - 1) - i + 1
                        touched |= 1 << d
                        live &= ~(1 << d)
            for u in ins.uses:
                if u in length and not live >> u & 1:
                    live |= 1 << u
                    top[u] = i - 1
                    touched |= 1 << u
        for v, t in top.items():
            length[v] += t + 1
        through[b.id] = live & ~touched
    starts = [0]                        # instructions before each block
    for b in blocks:
        starts.append(starts[-1] + len(b.instrs))
    run_start: dict[int, int] = {}
    prev = 0
    last = len(blocks) - 1
    for bid, cur in enumerate(through):
        for v in bits(cur & ~prev):
            run_start[v] = bid
        ending = cur & ~(through[bid + 1] if bid < last else 0)
        if ending:
            for v in bits(ending):
                length[v] += starts[bid + 1] - starts[run_start[v]]
        prev = cur
    return length


def group_by_source(values: list[dict]) -> list[dict]:
    """The peak's values grouped by the source line of their first definition (the PTX line
    where it has no ``.loc``), most registers first."""
    groups: dict[str, dict] = {}
    for v in values:
        src = next((s for s in v["defined_source"] if s), None)
        if src is not None:
            key = format_source(src, full=True)
            where = {"source": src}
        elif v["defined_lines"]:
            key = f"ptx:{v['defined_lines'][0]}"
            where = {"source": None, "ptx_line": v["defined_lines"][0]}
        else:
            key = "entry"
            where = {"source": None, "ptx_line": None}
        g = groups.setdefault(key, dict(where, registers=0.0, values=[]))
        g["registers"] += v["registers"]
        g["values"].append(v["name"])
    return sorted(groups.values(), key=lambda g: -g["registers"])


def next_step(sm, registers: int, block: int, static_shared: int = 0) -> int | None:
    """The most registers per thread that give more warps per SM than ``registers`` does at
    ``block`` threads (and ``static_shared`` bytes of shared memory a block); None when fewer
    registers would not raise occupancy."""
    now = occupancy(sm, registers, block, static_shared).warps_per_sm
    for r in range(registers - 1, 0, -1):
        if occupancy(sm, r, block, static_shared).warps_per_sm > now:
            return r
    return None


class ChangeScope:
    """What :func:`what_to_change` works on: the next occupancy step's register count
    (``target``, None when fewer registers would not raise occupancy), per excess ``e`` (in
    16-bit units above the target) the bitset of the instructions (by id) with that excess
    (``by_excess``), and per value the bitset of those instructions it is live at or defined by
    (``rows``); ``values`` is the bitset of the values in ``rows``."""

    __slots__ = ("target", "by_excess", "rows", "values")

    def __init__(self, target: int | None, by_excess: dict[int, int], rows: dict[int, int]):
        self.target = target
        self.by_excess = by_excess
        self.rows = rows
        values = 0
        for v in rows:
            values |= 1 << v
        self.values = values


def change_scope(a, sm, block: int, static_shared: int = 0) -> ChangeScope:
    """The instructions above the next occupancy step and the values live at each
    (:class:`ChangeScope`). A value's instructions are found per live segment (one range of
    instruction ids from its last use up to its definition or the block's start), not
    instruction by instruction."""
    p = a.pressure
    target = next_step(sm, p.max_live, block, static_shared)
    if target is None:
        return ChangeScope(None, {}, {})
    cfg = a.cfg
    limit = 2 * target
    gpr = p.gpr
    by_excess: dict[int, int] = {}
    above_blocks = set()
    block_of = cfg.block_of
    # only an instruction above target - 1/4 can round above it: filtered first (few are)
    floor = target - 0.25
    for i in [i for i, g in enumerate(gpr) if g > floor]:
        e = int(round(2 * gpr[i])) - limit
        if e > 0:
            by_excess[e] = by_excess.get(e, 0) | 1 << i
            above_blocks.add(block_of[i])
    # only the blocks holding such an instruction are walked (few are: the next step is just
    # below MaxLive); an instruction of them below the target is in no by_excess set, so the
    # rows may hold it
    rows: dict[int, int] = {}
    live_out = a.liveness.live_out
    for bid in sorted(above_blocks):
        b = cfg.blocks[bid]
        instrs = b.instrs
        first = b.first
        live = live_out[bid]
        top: dict[int, int] = {}        # value -> last instruction id of its open segment
        touched = 0
        for k in range(len(instrs) - 1, -1, -1):
            ins = instrs[k]
            i = first + k
            for d in ins.defs:
                if not live >> d & 1:
                    rows[d] = rows.get(d, 0) | 1 << i     # defined, dead after
                elif ins.guard < 0:                        # its segment starts here
                    t = top.pop(d, first + len(instrs) - 1)
                    rows[d] = rows.get(d, 0) | ((1 << (t - i + 1)) - 1) << i
                    touched |= 1 << d
            if ins.guard < 0:
                for d in ins.defs:
                    live &= ~(1 << d)
            for u in ins.uses:
                if not live >> u & 1:
                    live |= 1 << u
                    top[u] = i - 1
                    touched |= 1 << u
        for v, t in top.items():
            if t >= first:
                rows[v] = rows.get(v, 0) | ((1 << (t - first + 1)) - 1) << first
        whole = ((1 << len(instrs)) - 1) << first
        for v in bits(live & ~touched):
            rows[v] = rows.get(v, 0) | whole
    above = 0
    for m in by_excess.values():
        above |= m
    rows = {v: r & above for v, r in rows.items() if r & above}
    return ChangeScope(target, by_excess, rows)


def what_to_change(a, sm, block: int, block_from: str, max_picks: int = 32,
                   shared: tuple | None = None, static_shared: int = 0,
                   scope: ChangeScope | None = None) -> dict:
    """The registers to shed for the next occupancy step and the cheapest values to
    rematerialize or spill to get there (module docstring); ``shared`` is
    :func:`remat_and_costs` of ``a`` and ``scope`` :func:`change_scope` when the caller has
    them; ``static_shared`` the function's own shared memory per block, which can limit
    occupancy before registers do."""
    p = a.pressure
    max_live = p.max_live
    now = occupancy(sm, max_live, block, static_shared)
    out = {"block_size": block, "block_from": block_from,
           "registers_now": max_live, "occupancy_now": now.as_dict()}
    if scope is None:
        scope = change_scope(a, sm, block, static_shared)
    target = scope.target
    if target is None:
        out["next_step"] = None
        out["note"] = (f"fewer registers would not raise occupancy at {block} threads "
                       f"(limited by {now.limiter})")
        return out
    step = occupancy(sm, target, block, static_shared)
    regs = a.fn.regs
    rows = scope.rows
    remat, remat_costs, costs = shared or remat_and_costs(a, scope.values)
    candidates = {}
    for v in sorted(rows):
        if regs.classes[v] == RegClass.PRED or p.units[v] == 0:
            continue
        cost = remat_costs[v] if v in remat else costs[v]
        if cost == float("inf"):
            continue
        candidates[v] = cost
    # the instructions still above the target, by their excess: a pick of w units moves
    # those it is live at from excess e to e - w (or out, at e <= w)
    by_excess = dict(scope.by_excess)

    # greedy by registers freed per unit of cost; a value's gain only falls as picks lower the
    # excess, so a stale gain bounds the fresh one from above and only the value on top of
    # the heap is re-scored (lazy greedy: the same picks, ties to the lowest register id)
    def gain_of(v: int) -> int:
        w = p.units[v]
        r = rows[v]
        gain = 0
        for e, m in by_excess.items():
            n = (r & m).bit_count()
            if n:
                gain += n * (w if w < e else e)
        return gain

    heap = [(-gain_of(v) / max(cost, 1e-6), v, 0) for v, cost in candidates.items()]
    heap = [h for h in heap if h[0] < 0]
    heapq.heapify(heap)
    picks = []
    short = 0                                   # instructions still above the target
    for m in by_excess.values():
        short += m.bit_count()
    while heap and short and len(picks) < max_picks:
        score, v, stamp = heapq.heappop(heap)
        if stamp != len(picks):
            gain = gain_of(v)
            if gain:
                heapq.heappush(heap, (-gain / max(candidates[v], 1e-6), v, len(picks)))
            continue
        w = p.units[v]
        r = rows[v]
        lowered: dict[int, int] = {}
        for e, m in by_excess.items():
            moved = m & r
            if m & ~r:
                lowered[e] = lowered.get(e, 0) | m & ~r
            if moved:
                if e > w:
                    lowered[e - w] = lowered.get(e - w, 0) | moved
                else:
                    short -= moved.bit_count()
        by_excess = lowered
        picks.append({"name": regs.names[v], "registers": w / 2,
                      "action": "rematerialize" if v in remat else "spill",
                      "cost": round(candidates.pop(v), 3)})
    out["next_step"] = {"registers": target, "shed": max_live - target,
                        "occupancy": step.as_dict()}
    out["candidates"] = picks
    out["candidates_cost"] = round(sum(x["cost"] for x in picks), 3)
    out["enough"] = not short
    return out
