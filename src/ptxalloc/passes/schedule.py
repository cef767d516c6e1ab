"""Register-pressure-aware list scheduling within blocks, before allocation (seed 002
"Instruction Scheduling Interaction"; issue 13).

The function is cut into *segments*: maximal runs of instructions with no label, directive,
scope brace or declaration between them, each barrier (:data:`ptxalloc.ir.effects.BARRIER`:
synchronisation, fences, atomics, asynchronous operations and their waits, branches, calls,
anything unknown) a segment of its own. Inside a segment only the dependences of the original
order bind: for every register, reads after the definition that reaches them (RAW), before the
next definition (WAR), definitions in order (WAW) — guards, partial definitions and address
registers count as reads as the ISA table says — and memory accesses and warp collectives
(``ORDERED``) keep their order, as do the instructions of the carry chain, except that two
loads (:func:`ptxalloc.ir.effects.reads_memory_only`) with no store or collective between them
may trade places.

Each segment is list-scheduled bottom-up (in the manner of Sethi-Ullman numbering and of LLVM's
``GenericScheduler`` register-pressure heuristic): from the values live after the segment,
the next instruction placed (the latest still free of unplaced successors) is the one whose
placement makes the live set grow least — a definition that ends a live value first, an
instruction whose operands are already live next — then, of equal growth, the one whose
placement makes ready a predecessor that ends a value (one step of lookahead: of the two
``wmma.mma`` reading a fragment, the one after which the fragment's load is free to go, so the
load lands right after the ``wmma.mma`` that frees the previous fragment), and on a tie the one
latest in the original order, so that where nothing is gained the order stays as written.
Loads therefore sink to just before their first use (past other loads, never across a store),
and an address computed from live operands moves next to the access that reads it. The new
order is kept only when the segment's peak pressure (general registers and predicates, counted
as :mod:`analysis.pressure` counts them, and at equal peaks the sum over its instructions) is
lower; otherwise the segment stays as written. So the pass never raises MaxLive.

*Stores last.* Where a segment has stores (or Triton's masked loads, below), a second order is
tried and kept when its peak is lower than the first's (docs/decisions.md, "Loaded values held
from their load to their use"). No load may pass a store, so when a segment loads everything
before its first store (Triton's layer-norm epilogue: 24 masked loads, then the arithmetic,
then 8 stores), the first order, greedy on growth, puts each result's arithmetic right above
its store and leaves every loaded value live from the loads above the first store down to it.
The second places, bottom-up, in three tiers: first what does not grow the general registers
(counting ``unlocks``) or computes only from values from before the segment (``rooted``: an
address or a mask predicate formed at its store), then the stores, then the rest; within a
tier by growth, ``unlocks``, then depth first (the candidate whose last successor was placed
latest), ``need`` and place. So the stores and what forms their operands stay at the bottom,
and above them each result is computed right after its own loads: the results are held, not
the loaded values. Triton writes a masked load as ``mov.u32 %r, 0x0; @%p ld.global.b32 {%r},
[..]``; the guarded load does not end ``%r`` (the ``mov`` does, and its one successor is the
load), so the second order counts such a load as ending it.

The result is a permutation of the original instructions; :mod:`ptxalloc.verify.schedule`
validates it independently (and the allocation checker then proves the allocation against the
scheduled order; docs/checker.md). Switch: the knob ``schedule`` (1, the default; ``--knob
schedule=0`` allocates the order as written).
"""

from __future__ import annotations

import heapq

from ..analysis.liveness import Liveness
from ..ir.cfg import CFG
from ..ir.effects import BARRIER, ORDERED, effect_kind, reads_memory_only, uses_carry
from ..ir.instruction import COMMENT, LOC, Instruction, Raw
from ..ir.module import Function
from ..ir.registers import RegClass
from ..records import record
from ..target.units import vreg_shape
from ..util import gc_paused
from ..analysis import Pressure, pressure_of, remembered_pressure
from ..analysis.tuples import find_tuples

MIN_SEGMENT = 3     # shorter segments have nothing to gain


@record
class Scheduled:
    """A scheduled copy of a function: ``order`` lists the original instruction indices in
    their new order; ``segments`` is how many segments were reordered, ``moved`` how many
    instructions changed place."""

    function: Function
    order: list[int]
    segments: int
    moved: int

    def report(self) -> dict:
        return {"segments": self.segments, "moved": self.moved}


def _segment_ranges(fn: Function) -> list[tuple[int, int]]:
    """[start, end) instruction index ranges of the segments that may be reordered."""
    out = []
    start = -1
    k = 0
    for s in fn.body:
        t = type(s)
        if t is Instruction:
            if effect_kind(s) == BARRIER:
                if start >= 0:
                    out.append((start, k))
                start = -1
            elif start < 0:
                start = k
            k += 1
        elif t is Raw and s.kind in (COMMENT, LOC):
            continue
        elif start >= 0:
            out.append((start, k))
            start = -1
    if start >= 0:
        out.append((start, k))
    return [(a, b) for a, b in out if b - a >= MIN_SEGMENT]


def schedule_function(fn: Function, stores_last: bool = True) -> Scheduled | None:
    """The function with each segment in the order of lowest pressure found, or None when no
    segment is improved; ``stores_last`` (knob ``ScheduleStoresLast``) tries the second order
    (module docstring) too."""
    with gc_paused():
        ranges = _segment_ranges(fn)
        if not ranges:
            return None
        # the recomputation's "after" when it ran (pressure_of keeps it): its CFG, liveness
        # and tuples are this function's, and its MaxLive the one to beat
        before = remembered_pressure(fn)
        if before is not None and before.tuples is not None:
            cfg, liveness, tuples = before.cfg, before.liveness, before.tuples
        else:
            before = None
            cfg = CFG(fn)
            liveness = Liveness(cfg)
            tuples = find_tuples(fn, cfg.instrs)
        regs = fn.regs
        weight = []
        is_pred = []
        for c, vec in zip(regs.classes, regs.vec):
            p = c == RegClass.PRED
            is_pred.append(p)
            weight.append(1 if p else vreg_shape(c, vec).units)
        instrs = cfg.instrs
        spans = {v: (len(regs) + gid, frozenset(m for m, _ in tuples.groups[gid].members))
                 for v, (gid, _) in tuples.group_of.items()}
        for gid, g in enumerate(tuples.groups):
            weight.append(g.units)
            is_pred.append(False)
        block_of = cfg.block_of
        after_cache: dict[int, list[int]] = {}
        order = list(range(len(instrs)))
        changed = moved = 0
        for a, b in ranges:
            blk = block_of[b - 1]
            after = after_cache.get(blk)
            if after is None:
                after = after_cache[blk] = liveness.live_after(blk)
            live_out = after[b - 1 - cfg.blocks[blk].first]
            local = _schedule_segment(instrs[a:b], live_out, weight, is_pred, spans,
                                      len(regs), stores_last)
            if local is not None:
                changed += 1
                for k, x in enumerate(local):
                    order[a + k] = a + x
                    moved += x != k
        if not changed:
            return None
        new = fn.reordered(order)
        if before is None:
            before = Pressure(cfg, liveness, tuples)
        after = pressure_of(new)
        if after.max_live > before.max_live or after.max_preds > before.max_preds:
            return None
        return Scheduled(new, order, changed, moved)


def _schedule_segment(seg: list[Instruction], live_out: int, weight: list[int],
                      is_pred: list[bool], spans: dict[int, tuple[int, frozenset]],
                      n_regs: int, stores_last: bool = True) -> list[int] | None:
    """The new order of one segment (local indices), or None when it does not lower the
    segment's pressure. ``spans`` maps a member of a tuple group (registers an instruction
    names as one vector, allocated side by side) to the group's number in ``weight`` and its
    members: for pressure the group counts as one value of the group's width, live while a
    member is, ended only by an instruction that defines every member (as
    :mod:`ptxalloc.analysis.pressure` counts it)."""
    n = len(seg)
    # local register numbering: dependences between registers, pressure between values
    # (a register, or the tuple group it belongs to)
    ids: dict[int, int] = {}
    dep_uses: list[tuple[int, ...]] = []
    dep_defs: list[tuple[int, ...]] = []
    uses: list[tuple[int, ...]] = []
    defs: list[tuple[int, ...]] = []
    kills: list[tuple[int, ...]] = []
    for ins in seg:
        dep_uses.append(tuple(ids.setdefault(v, len(ids)) for v in ins.uses))
        dep_defs.append(tuple(ids.setdefault(v, len(ids)) for v in ins.defs))
        pu = tuple(dict.fromkeys(ids.setdefault(spans[v][0] if v in spans else v, len(ids))
                                 for v in ins.uses))
        pd = []
        pk = []
        defined = set(ins.defs)
        for v in ins.defs:
            span = spans.get(v)
            x = ids.setdefault(span[0] if span else v, len(ids))
            if x not in pd:
                pd.append(x)
                if ins.guard < 0 and (span is None or span[1] <= defined):
                    pk.append(x)
        uses.append(pu)
        defs.append(tuple(pd))
        kills.append(tuple(pk))
    nregs = len(ids)
    w = [0] * nregs
    wp = [False] * nregs
    live0 = [False] * nregs
    for v, i in ids.items():
        w[i] = weight[v]
        wp[i] = is_pred[v]
        if v < n_regs and live_out >> v & 1:     # a register, not a group: live after
            span = spans.get(v)
            live0[ids[span[0]] if span else i] = True
    # the dependence graph of the original order
    preds: list[list[int]] = [[] for _ in range(n)]
    last_def: dict[int, int] = {}
    reads: dict[int, list[int]] = {}
    last_carry = -1
    last_store = -1         # the last ORDERED instruction that is not a load
    loads: list[int] = []   # the loads since
    need = [0] * n          # Sethi-Ullman number: the registers evaluating j's operands takes
    ends = [()] * n         # values a guarded definition's lone full definition ends next
    stores = [False] * n    # ORDERED instructions that are not loads
    rooted = [False] * n    # arithmetic on values from before the segment only
    for j, ins in enumerate(seg):
        pj = preds[j]
        if ins.guard >= 0:
            ends[j] = tuple(_ending(ins, last_def, reads, ids, kills, spans))
        producers = set()
        for u in dep_uses[j]:
            d = last_def.get(u)
            if d is not None:
                pj.append(d)
                producers.add(d)
        out_w = sum(w[d] for d in defs[j])
        held = 0
        nd = out_w
        for p in sorted(producers, key=need.__getitem__, reverse=True):
            nd = max(nd, held + need[p])
            held += sum(w[d] for d in defs[p])
        need[j] = max(nd, held)
        for d in dep_defs[j]:
            x = last_def.get(d)
            if x is not None:
                pj.append(x)
            pj.extend(reads.get(d, ()))
        for u in dep_uses[j]:
            reads.setdefault(u, []).append(j)
        for d in dep_defs[j]:
            last_def[d] = j
            reads[d] = []
        if uses_carry(ins):
            if last_carry >= 0:
                pj.append(last_carry)
            last_carry = j
        kind = effect_kind(ins)
        rooted[j] = kind != ORDERED and all(rooted[p] for p in producers)
        if kind == ORDERED:
            if last_store >= 0:
                pj.append(last_store)
            if reads_memory_only(ins):
                loads.append(j)
            else:               # after every load since the last store or collective
                stores[j] = True
                pj.extend(loads)
                loads = []
                last_store = j
    touching: list[list[int]] = [[] for _ in range(nregs)]
    for j in range(n):
        for r in set(uses[j] + defs[j]):
            touching[r].append(j)
    preds = [list(dict.fromkeys(p)) for p in preds]    # without repeats
    best = None
    as_written = list(range(n))
    orders = [_list_schedule(preds, uses, kills, w, need, live0, touching)]
    if stores_last and (any(stores) or any(ends)):
        orders.append(_list_schedule(preds, uses, kills, w, need, live0, touching,
                                     _StoresLast(ends, stores, rooted,
                                                 [0 if p else x for x, p in zip(w, wp)])))
    # an order that is the code as written cannot be better than it: no pressure walk for it
    orders = [placed for placed in orders if placed != as_written]
    if not orders:
        return None
    old = _pressure(as_written, uses, defs, kills, w, wp, live0)
    for placed in orders:
        new = _pressure(placed, uses, defs, kills, w, wp, live0)
        better = (new[0] <= old[0] and new[1] <= old[1]
                  and (new[0] < old[0] or new[1] < old[1] or new[2] < old[2]))
        if better and (best is None or new[:2] < best[0][:2]):
            best = (new, placed)
    return best[1] if best else None


def _ending(ins: Instruction, last_def: dict[int, int], reads: dict[int, list[int]],
            ids: dict[int, int], kills, spans) -> list[int]:
    """The values (pressure ids) that the guarded instruction ``ins`` defines partially and
    whose definition reaching it (``last_def``, before ``ins``) is a full one with no reader in
    between (Triton's ``mov.u32 %r, 0x0; @%p ld.global.b32 {%r}, [..]``): that definition's one
    successor is ``ins``, so once ``ins`` is placed (bottom-up) it is ready and ends the
    value."""
    out = []
    for v in ins.defs:
        if v in spans:
            continue
        d = ids[v]
        x = last_def.get(d)
        if x is not None and not reads.get(d) and d in kills[x]:
            out.append(d)
    return out


@record
class _StoresLast:
    """What the second order of a segment (module docstring, "Stores last") reads, per local
    instruction: ``ends`` (:func:`_ending`), ``stores`` (ORDERED, not a load), ``rooted``
    (arithmetic whose operands, through the segment's own definitions, all come from before
    the segment: no load under it) and ``gpr_weight`` (the pressure ids' weights, predicates
    0)."""

    ends: list[tuple[int, ...]]
    stores: list[bool]
    rooted: list[bool]
    gpr_weight: list[int]


def _list_schedule(preds: list[list[int]], uses, kills, w, need, live0, touching,
                   stores_last: _StoresLast | None = None) -> list[int]:
    """The bottom-up list schedule of a segment whose dependences are ``preds`` (each
    instruction's predecessors), as local indices in program order: from the values live
    after the segment, each step places the ready instruction (all successors placed) whose
    placement makes the live set grow least, then the one that lets a predecessor free the
    most (``unlocks``), then the smaller Sethi-Ullman number ``need``, then the later one.

    With ``stores_last``, the second order: ready instructions come in three tiers, first
    those that do not grow the general registers (counting ``unlocks``) or compute from values
    live anyway (``rooted``), then stores, then the rest; within a tier by growth (a guarded
    definition counted as ending the value its lone full definition ``ends``), ``unlocks``,
    then depth first (the one whose last successor was placed latest), ``need`` and place."""
    ends = stores_last.ends if stores_last else None
    n = len(preds)
    succs: list[list[int]] = [[] for _ in range(n)]
    for y, p in enumerate(preds):
        for x in p:
            succs[x].append(y)
    nsucc = [len(x) for x in succs]
    live = list(live0)
    recent = [-1] * n       # when j's last successor was placed: depth first, the latest

    def delta(j: int, w: list[int] = w) -> int:
        dl = 0
        ks = kills[j]
        for k in ks:
            if live[k]:
                dl -= w[k]
        for u in uses[j]:
            if not live[u] or u in ks:
                dl += w[u]
        if ends is not None:
            for e in ends[j]:
                if live[e]:
                    dl -= w[e]
        return dl

    def unlocks(j: int, w: list[int] = w) -> int:
        """How much placing ``j`` lets its predecessors free next: the least growth of the
        live set among the predecessors whose last unplaced successor ``j`` is, counted with
        the live set after ``j`` (0 when none shrinks it). Breaks ties between candidates of
        equal growth: the one that makes a definition ready that ends a value (a fragment
        load whose last reader ``j`` is) goes first."""
        best = 0
        ks = kills[j]
        us = uses[j]
        for p in preds[j]:
            if nsucc[p] != 1:
                continue
            dl = 0
            kp = kills[p]
            for k in kp:
                if (live[k] and k not in ks) or k in us:
                    dl -= w[k]
            if dl == 0:
                continue
            for u in uses[p]:
                if not ((live[u] and u not in ks) or u in us) or u in kp:
                    dl += w[u]
            if dl < best:
                best = dl
        return best

    if stores_last is None:
        def key(j: int) -> tuple:
            return (delta(j), unlocks(j), need[j], -j)
    else:
        stores, rooted, gpr_w = stores_last.stores, stores_last.rooted, stores_last.gpr_weight
        same = gpr_w == w                   # no predicate among the pressure ids: one pair

        def key(j: int) -> tuple:
            grows, frees = delta(j), unlocks(j)
            if rooted[j]:
                tier = 0
            else:
                gpr = grows + frees if same else delta(j, gpr_w) + unlocks(j, gpr_w)
                tier = 0 if gpr <= 0 else 2 - stores[j]
            return (tier, grows, frees, -recent[j], need[j], -j)

    heap = [key(j) for j in range(n) if nsucc[j] == 0]
    heapq.heapify(heap)
    ready = [nsucc[j] == 0 for j in range(n)]
    done = [False] * n
    placed: list[int] = []
    push = heapq.heappush
    pop = heapq.heappop

    def last_successor(p: int, again: set[int]) -> None:
        """``p`` waits for one successor more: that one may now unlock it."""
        for c in succs[p]:
            if not done[c]:
                if ready[c]:
                    again.add(c)
                return

    while heap:
        entry = pop(heap)
        j = -entry[-1]
        if done[j]:
            continue
        now = key(j)
        if now != entry:
            push(heap, now)
            continue
        done[j] = True
        placed.append(j)
        for k in kills[j]:
            live[k] = False
        woke = []
        for u in uses[j]:
            if not live[u]:
                live[u] = True
                woke.append(u)
        again: set[int] = set()     # candidates whose key changed: pushed once it is known
        for p in preds[j]:
            nsucc[p] -= 1
            if nsucc[p] == 0:
                ready[p] = True
                recent[p] = len(placed)
                again.add(p)
            elif nsucc[p] == 1:
                last_successor(p, again)
        for r in woke:             # candidates that read or define r got cheaper
            for c in touching[r]:
                if not done[c]:
                    if ready[c]:
                        again.add(c)
                    elif nsucc[c] == 1:
                        last_successor(c, again)
        for c in again:
            push(heap, key(c))
    if len(placed) != n:
        raise AssertionError("the dependence graph of a segment has a cycle")
    placed.reverse()
    return placed


def _pressure(order: list[int], uses, defs, kills, w, wp, live0) -> tuple[int, int, int]:
    """(peak general-register units, peak predicates, sum of general-register units over the
    instructions) of a segment in ``order``, counting the registers it touches."""
    live = list(live0)
    g = sum(x for x, p, l in zip(w, wp, live) if l and not p)
    pr = sum(1 for p, l in zip(wp, live) if l and p)
    peak_g = peak_p = total = 0
    for j in reversed(order):
        eg, ep = g, pr
        for d in defs[j]:
            if not live[d]:
                if wp[d]:
                    ep += 1
                else:
                    eg += w[d]
        if eg > peak_g:
            peak_g = eg
        if ep > peak_p:
            peak_p = ep
        total += eg
        for k in kills[j]:
            if live[k]:
                live[k] = False
                if wp[k]:
                    pr -= 1
                else:
                    g -= w[k]
        for u in uses[j]:
            if not live[u]:
                live[u] = True
                if wp[u]:
                    pr += 1
                else:
                    g += w[u]
    return peak_g, peak_p, total

