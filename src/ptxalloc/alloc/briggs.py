"""Briggs optimistic coloring: simplify, freeze, spill, select (seed 000 phase 4; seed 002
"Worklist Structures", "Priority Computation", "Tie-Breaking Rules"; SPEC 4.4).

Worklists, as seed 002 lays them out:

* *simplify* — a max-heap of trivially colorable nodes (weighted degree below the number of
  placements: the seeds' "degree < K", the "infinite priority" tier), ordered by
  ``spill_cost / max(degree x 0.8, 1)``; ties go to the lower degree, then the lower register
  id;
* *freeze* — a FIFO of trivially colorable nodes that are still move-related (a copy joins them
  to a node they were not merged with): they wait until nothing else simplifies, then give up
  their moves;
* *spill* — a min-heap of the other nodes by the same ratio.

The loop removes a node from simplify when it can; else it freezes one node; else it takes the
spill candidate with the lowest ``spill_cost / max(degree x 0.8, 1)`` and pushes it on the stack
anyway (optimistic, Briggs). Removing a node lowers its neighbours' degrees, which may make them
trivially colorable. Then *select* pops the stack: each node takes the lowest free placement its
shape allows (class and alignment), preferring among free placements those inside its preferred
registers (callee-saved ones for values live across calls, SPEC section 7) and then one whose
bank (register index mod 32) differs from the banks of its soft bank-conflict partners
(SPEC 4.2). A node that
finds no free placement is an actual spill. Nodes fixed by the calling convention keep their
placement and are never removed.

The Tier-1 test is stated two ways by the seeds; SPEC 4.4 settles on the classic
"weighted degree < placements", which is what makes removal safe.
"""

from __future__ import annotations

import heapq
from collections import deque
from functools import reduce
from operator import or_

from ..target.units import blocking_weight
from ..util import bits, numpy_when_worth, set_positions
from .api import Allocator, Coloring, Problem, register

BANKS = 32
#: the seeds' 0.8 (magic constant 0xCCCCCCCCCCCCCCCD) in the spill-priority ratio
#: ``spill_cost / max(degree x 0.8, 1)`` (seed 002 "Priority Computation"); the same constant
#: as coalescing's significance factor, but its own knob
PRIORITY_FACTOR = 0.8


def _ratio(cost: float, wdeg: int, factor: float) -> float:
    return cost / max(wdeg * factor, 1.0)


def color(p: Problem, factor: float = PRIORITY_FACTOR) -> Coloring:
    result = Coloring()
    wdeg = dict(p.wdeg)
    shape = p.shape
    cost = p.cost
    adj = p.adj
    precolored = p.precolored
    placements = p.placements
    active = {n: True for n in p.members if n not in precolored}
    active_mask = 0
    for n in active:
        active_mask |= 1 << n
    # move-related nodes: ends of copies that were not merged
    move_partners: dict[int, set[int]] = {}
    for _, d, s, _ in p.moves:
        a, b = p.find(d), p.find(s)
        if a != b and a in active and b in active and not p.interferes(a, b):
            move_partners.setdefault(a, set()).add(b)
            move_partners.setdefault(b, set()).add(a)

    simplify: list[tuple] = []
    freeze: deque[int] = deque()
    spill: list[tuple] = []
    where: dict[int, str] = {}

    def push_simplify(n: int) -> None:
        where[n] = "simplify"
        heapq.heappush(simplify, (-_ratio(cost[n], wdeg[n], factor), wdeg[n], n))

    def push_spill(n: int) -> None:
        where[n] = "spill"
        heapq.heappush(spill, (_ratio(cost[n], wdeg[n], factor), wdeg[n], n))

    def classify(n: int) -> None:
        if wdeg[n] < placements[n]:
            if move_partners.get(n):
                where[n] = "freeze"
                freeze.append(n)
            else:
                push_simplify(n)
        else:
            push_spill(n)

    for n in sorted(active):
        classify(n)

    dense = _dense_degrees(p, active)
    if dense is not None:
        wdeg = dense.wdeg
    else:
        shape_id, weights = _shape_ids(p)
        # the degrees and placements as lists by node id: list lookups per edge
        wdeg = [0] * p.nregs
        room = [0] * p.nregs
        for n, d in p.wdeg.items():
            wdeg[n] = d
            room[n] = placements[n]
    # per removed node, its neighbours still active then: the nodes select colors before it
    # (the ones removed after it), so that select gathers their units from this list instead
    # of unpacking the neighbours again (with dense degrees, numpy's index array as it is)
    later: dict = {}

    def remove(n: int) -> None:
        nonlocal active_mask
        active[n] = False
        active_mask &= ~(1 << n)
        where[n] = "stack"
        result.stack.append(n)
        if dense is not None:
            lowered, later[n] = dense.lower(n, adj[n] & active_mask)
            for m in lowered:
                if where.get(m) == "spill":
                    classify(m)
        else:
            loses = weights[shape_id[n]]    # per neighbour shape id, its loss
            later[n] = neighbours = bits(adj[n] & active_mask)
            for m in neighbours:
                before = wdeg[m]
                after = wdeg[m] = before - loses[shape_id[m]]
                if before >= room[m] > after and where.get(m) == "spill":
                    classify(m)
        for m in move_partners.pop(n, ()):
            partners = move_partners.get(m)
            if partners is not None:
                partners.discard(n)

    while True:
        if simplify:
            _, _, n = heapq.heappop(simplify)
            if not active.get(n) or where.get(n) != "simplify":
                continue
            remove(n)
        elif freeze:
            n = freeze.popleft()
            if not active.get(n) or where.get(n) != "freeze":
                continue
            for m in move_partners.pop(n, ()):          # give up its moves
                partners = move_partners.get(m)
                if partners is not None:
                    partners.discard(n)
            classify(n)
        elif spill:
            key, deg, n = heapq.heappop(spill)
            if not active.get(n) or where.get(n) != "spill":
                continue
            now = _ratio(cost[n], wdeg[n], factor)
            if now != key:                              # degree dropped since: re-key
                heapq.heappush(spill, (now, wdeg[n], n))
                continue
            result.optimistic += 1
            remove(n)
        else:
            break

    # select
    # the placements, the precolored first: select asks no occupancy of a unit matrix, only
    # each colored neighbour's units (``units_of``), so it keeps none
    start = result.start = dict(p.precolored)
    regfile = p.regfile
    bank_adj = p.bank_adj
    # with at most 32 registers, two registers never share a bank: bank preferences matter
    # only above that
    banked = regfile.k > BANKS
    # the units each node holds (0: none yet, or spilled): a node's colored neighbours are the
    # precolored ones and those of its ``later`` list that found a placement
    units_of = [0] * p.nregs
    precolored_mask = 0
    # the bank of each colored register (bank partners), and the bitset of those registers
    members, offset = p.members, p.offset
    bank_of = [0] * p.nregs
    placed_regs = 0
    for n, s in start.items():
        units_of[n] = shape[n].mask(s)
        precolored_mask |= 1 << n
        for v in members.get(n, (n,)):
            placed_regs |= 1 << v
            bank_of[v] = (s + offset[v]) // 2 % BANKS
    unit = units_of.__getitem__
    # dense: the same units in a numpy object array, gathered by the index arrays and ORed by
    # numpy's loop (no list made of the indices, and the ORs 1.5-2x faster: issue 16)
    units_array = dense.units_array(units_of) if dense is not None else None
    for n in reversed(result.stack):
        fixed = adj[n] & precolored_mask
        forbidden = reduce(or_, map(unit, bits(fixed)), 0) if fixed else 0
        if units_array is None:
            forbidden = reduce(or_, map(unit, later[n]), forbidden)
        elif len(later[n]):
            forbidden |= dense.np.bitwise_or.reduce(units_array[later[n]])
        want = p.prefer.get(n)
        banks = _partner_banks(p, n, bank_adj, placed_regs, bank_of) if banked else None
        first_free = first_wanted = choice = None
        sh = shape[n]
        free = regfile.free_starts(sh, forbidden)     # the placements free here, lowest first
        while free:
            low = free & -free
            free ^= low
            s = low.bit_length() - 1
            if first_free is None:
                first_free = s
            if want:
                mask = sh.mask(s)
                if mask & want != mask:
                    continue
            if first_wanted is None:
                first_wanted = s
            if not banks or (s // 2) % BANKS not in banks:
                choice = s
                break
        if choice is None:
            choice = first_wanted if first_wanted is not None else first_free
        if choice is None:
            result.spilled.append(n)
            continue
        start[n] = choice
        units_of[n] = sh.mask(choice)
        if units_array is not None:
            units_array[n] = units_of[n]
        if banked:
            for v in members[n]:
                placed_regs |= 1 << v
                bank_of[v] = (choice + offset[v]) // 2 % BANKS
    return result


class _DenseDegrees:
    """The weighted degrees of a dense graph (Triton kernels: thousands of nodes, hundreds of
    neighbours each) in a numpy array, so that removing a node lowers all its neighbours'
    degrees in a few array operations instead of a Python step per edge (issue 16's profile:
    Briggs's ``remove`` is a third of such a kernel's allocation). Integer arithmetic: the
    degrees, and so every priority and tie, are exactly those of the plain walk."""

    def __init__(self, np, p: Problem, active):
        size = p.nregs
        self.np = np
        self.nbytes = (size + 7) // 8
        self.wdeg = np.zeros(size, np.int64)
        self.room = np.zeros(size, np.int64)
        for n in p.members:
            self.wdeg[n] = p.wdeg[n]
            self.room[n] = p.placements[n]
        self.shape_id, weights = _shape_ids(p)
        self.sid = np.array(self.shape_id, np.int64)
        # weight[j][i]: how much a neighbour of shape i loses when a node of shape j goes
        self.weight = [np.array(row, np.int64) for row in weights]
        self.none = np.zeros(0, np.intp)            # no neighbour

    def lower(self, n: int, neighbours: int) -> tuple[list[int], object]:
        """Lower the degrees of ``neighbours`` (a bitset) for the removal of node ``n``; the
        neighbours whose degree fell below their placements by it (a list), and all of them
        (numpy's index array), in ascending order."""
        if not neighbours:
            return [], self.none
        np = self.np
        raw = np.frombuffer(neighbours.to_bytes(self.nbytes, "little"), np.uint8)
        idx = set_positions(np, np.unpackbits(raw, bitorder="little"))
        before = self.wdeg[idx]
        after = before - self.weight[self.shape_id[n]][self.sid[idx]]
        self.wdeg[idx] = after
        room = self.room[idx]
        return idx[(before >= room) & (room > after)].tolist(), idx

    def units_array(self, units_of: list[int]):
        """``units_of`` (units held per node, Python ints) as a numpy object array."""
        out = self.np.empty(len(units_of), dtype=object)
        out[:] = units_of
        return out


def _dense_degrees(p: Problem, active) -> _DenseDegrees | None:
    """A :class:`_DenseDegrees` of ``p`` when its graph is large and dense enough to repay
    numpy (and numpy's import: :func:`ptxalloc.util.numpy_when_worth`), else None."""
    if len(active) < DENSE_NODES:
        return None
    edges = sum(p.adj[n].bit_count() for n in active)
    if edges < DENSE_DEGREE * len(active):
        return None
    np = numpy_when_worth(edges)
    return None if np is None else _DenseDegrees(np, p, active)


DENSE_NODES = 1024          # measured on the Triton set: below this the plain walk is as fast
DENSE_DEGREE = 64           # neighbours per node on average


def _shape_ids(p: Problem) -> tuple[list[int], list[list[int]]]:
    """Each node's shape as a small integer (a list by node id), and the weights of the
    shapes by id: ``weights[j][i]``, how much a neighbour of shape ``i`` loses from its
    weighted degree when a node of shape ``j`` is removed (``blocking_weight``; two list
    lookups per edge in simplify instead of a call on two shapes)."""
    shapes = sorted({p.shape[n] for n in p.members})
    ids = {sh: i for i, sh in enumerate(shapes)}
    shape_id = [ids.get(sh, 0) for sh in p.shape]
    return shape_id, [[blocking_weight(a, b) for a in shapes] for b in shapes]


def _partner_banks(p: Problem, n: int, bank_adj: list[int], placed_regs: int,
                   bank_of: list[int]) -> set[int]:
    """Banks of the colored soft bank-conflict partners of node ``n`` (``placed_regs``: the
    registers of the colored nodes, ``n``'s own never among them; ``bank_of``: their banks)."""
    partners = 0
    for v in p.members[n]:
        partners |= bank_adj[v]
    partners &= placed_regs
    return set(map(bank_of.__getitem__, bits(partners))) if partners else set()


class Briggs(Allocator):
    """The CICC allocator as a registry entry: coalesce, then simplify and select."""

    name = "briggs"
    description = "CICC's Briggs optimistic coloring (seeds 000-002)"
    coalesces = True

    def color(self, problem: Problem, options) -> Coloring:
        return color(problem, PRIORITY_FACTOR)


register(Briggs())
