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
from .costs import costs_from_terms
from .sources import format_source, source_of


def remat_and_costs(a) -> tuple[dict, list[float]]:
    """The function's rematerializable registers (with their definitions) and the spill cost
    of every register when those are rematerialized instead of spilled. :func:`peak_values`
    and :func:`what_to_change` share one (a register's cost depends on its own entry only)."""
    remat = remat_candidates(a.fn, a.cfg.instrs)
    costs = costs_from_terms(a.cost_terms, a.mem_latency,
                             {v: COMPUTE_COST for v in remat}) if remat else a.costs
    return remat, costs


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
    for i, ins in enumerate(instrs):
        for d in ins.defs:
            if want >> d & 1:
                defs[d].append(i)
        for u in ins.uses:
            if want >> u & 1:
                last_use[u] = i
                if i > peak_at and next_use[u] is None:
                    next_use[u] = i - peak_at
    all_remat, remat_costs = shared or remat_and_costs(a)
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
            "spill_cost": round(a.costs[v], 3),
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
    segment adds its length, a value live through a block the block's length, a definition
    nothing reads its one instruction."""
    length = dict.fromkeys(bits(want), 0)
    for b in cfg.blocks:
        instrs = b.instrs
        m = len(instrs)
        if not m:
            continue
        live = liveness.live_out[b.id] & want
        top: dict[int, int] = {}        # value -> last instruction of its open segment
        touched = 0                     # values whose segment is not the whole block
        for i in range(m - 1, -1, -1):
            ins = instrs[i]
            for d in ins.defs:
                if want >> d & 1:
                    if not live >> d & 1:
                        length[d] += 1          # defined, never read after
                    elif ins.guard < 0:         # the segment starts here
                        length[d] += top.pop(d, m - 1) - i + 1
                        touched |= 1 << d
                        live &= ~(1 << d)
            for u in ins.uses:
                if want >> u & 1 and not live >> u & 1:
                    live |= 1 << u
                    top[u] = i - 1
                    touched |= 1 << u
        for v, t in top.items():
            length[v] += t + 1
        for v in bits(live & ~touched):
            length[v] += m
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


def what_to_change(a, sm, block: int, block_from: str, max_picks: int = 32,
                   shared: tuple | None = None, static_shared: int = 0) -> dict:
    """The registers to shed for the next occupancy step and the cheapest values to
    rematerialize or spill to get there (module docstring); ``shared`` is
    :func:`remat_and_costs` of ``a`` when the caller has it; ``static_shared`` the function's
    own shared memory per block, which can limit occupancy before registers do."""
    p = a.pressure
    max_live = p.max_live
    now = occupancy(sm, max_live, block, static_shared)
    out = {"block_size": block, "block_from": block_from,
           "registers_now": max_live, "occupancy_now": now.as_dict()}
    target = next_step(sm, max_live, block, static_shared)
    if target is None:
        out["next_step"] = None
        out["note"] = (f"fewer registers would not raise occupancy at {block} threads "
                       f"(limited by {now.limiter})")
        return out
    step = occupancy(sm, target, block, static_shared)
    regs = a.fn.regs
    cfg = a.cfg
    # every instruction above the target: its excess (in 16-bit units) and live set
    excess: list[int] = []
    masks: list[int] = []
    limit = 2 * target
    # only the blocks holding such an instruction need their live sets (few do: the next step
    # is just below MaxLive)
    above = [i for i, g in enumerate(p.gpr) if int(round(2 * g)) > limit]
    block_of = cfg.block_of
    for bid in sorted({block_of[i] for i in above}):
        b = cfg.blocks[bid]
        for k, after in enumerate(a.liveness.live_after(bid)):
            i = b.first + k
            units = int(round(2 * p.gpr[i]))
            if units > limit:
                live = after
                for d in b.instrs[k].defs:
                    live |= 1 << d
                excess.append(units - limit)
                masks.append(live)
    remat, remat_costs = shared or remat_and_costs(a)
    # the instructions above the target each value is live at (a value's rows, by index)
    rows: dict[int, list[int]] = {}
    for j, m in enumerate(masks):
        for v in bits(m):
            rows.setdefault(v, []).append(j)
    candidates = {}
    for v in sorted(rows):
        if regs.classes[v] == RegClass.PRED or p.units[v] == 0:
            continue
        cost = remat_costs[v] if v in remat else a.costs[v]
        if cost == float("inf"):
            continue
        candidates[v] = cost
    # greedy by registers freed per unit of cost; a value's gain only falls as picks lower the
    # excess, so a stale gain bounds the fresh one from above and only the value on top of
    # the heap is re-scored (lazy greedy: the same picks, ties to the lowest register id)
    def gain_of(v: int) -> int:
        w = p.units[v]
        gain = 0
        for j in rows[v]:
            e = excess[j]
            if e > 0:
                gain += w if w < e else e
        return gain

    heap = [(-gain_of(v) / max(cost, 1e-6), v, 0) for v, cost in candidates.items()]
    heap = [h for h in heap if h[0] < 0]
    heapq.heapify(heap)
    picks = []
    short = sum(1 for e in excess if e > 0)     # instructions still above the target
    while heap and short and len(picks) < max_picks:
        score, v, stamp = heapq.heappop(heap)
        if stamp != len(picks):
            gain = gain_of(v)
            if gain:
                heapq.heappush(heap, (-gain / max(candidates[v], 1e-6), v, len(picks)))
            continue
        w = p.units[v]
        for j in rows[v]:
            if excess[j] > 0:
                excess[j] -= w
                if excess[j] <= 0:
                    short -= 1
        picks.append({"name": regs.names[v], "registers": w / 2,
                      "action": "rematerialize" if v in remat else "spill",
                      "cost": round(candidates.pop(v), 3)})
    out["next_step"] = {"registers": target, "shed": max_live - target,
                        "occupancy": step.as_dict()}
    out["candidates"] = picks
    out["candidates_cost"] = round(sum(x["cost"] for x in picks), 3)
    out["enough"] = not short
    return out
