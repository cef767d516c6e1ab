"""Conservative coalescing (seed 000 phase 3; seed 002 "Coalescing Algorithms"; SPEC 4.3).

A copy ``mov d, s`` is removed by merging its two ends into one node when they do not
interfere, have the same shape (class-compatible moves only), are not both fixed to different
registers, and the merge cannot make the graph harder to color, by either of two tests:

* Briggs: the merged node has fewer significant neighbours than it has placements;
* George: every significant neighbour of one end already interferes with the other end.

A neighbour is *significant* when its effective degree — weighted degree x 0.8, the seeds'
magic constant 0xCCCCCCCCCCCCCCCD — reaches its number of placements (K for 32-bit values).
The factor is a knob (``coalesce_factor``; 1.0 is the textbook conservative test). The pass
runs over all moves, hottest first, until a round merges nothing, at most 10 rounds
(``MAX_COALESCE_ITERATIONS``); nodes merge in a union-find.

A copy between a member of a register tuple (an ``ld.v4`` result, an ``mma`` fragment) and a
scalar may merge the scalar *into* the tuple, on the member's units, when the scalar interferes
with no member placed there; the same two tests decide, on the tuple's node. Two tuples are not
merged. :func:`merge_into_tuple` offers the same merge for a pair that is not a copy (a value
and the tuple member it reads for the last time: :mod:`ptxalloc.alloc.tuple_reuse`).
"""

from __future__ import annotations

from ..records import record
from ..target.units import blocking_weight
from ..util import bits
from .api import Problem

COALESCE_FACTOR = 0.8
MAX_COALESCE_ITERATIONS = 10


@record
class CoalesceStats:
    moves: int = 0
    coalesced: int = 0
    rounds: int = 0
    constrained: int = 0      # ends interfere or differ in shape: can never merge


def _significant(p: Problem, m: int, factor: float, wdeg: int | None = None) -> bool:
    w = p.wdeg[m] if wdeg is None else wdeg
    return w * factor >= p.placements[m]


def _weight_bound(p: Problem, shape, neighbours: int) -> int | None:
    """The weighted degree a node of ``shape`` with the bitset ``neighbours`` would have if
    every neighbour were significant: an upper bound of the weight Briggs's test adds up, in a
    few popcounts per shape (as :meth:`Problem.weighted_degree`) instead of a step per
    neighbour; None when some neighbour is in no shape's mask (then the test walks them)."""
    total = 0
    covered = 0
    for sh, mask in p.shape_masks.items():
        common = neighbours & mask
        if common:
            c = common.bit_count()
            covered += c
            total += blocking_weight(shape, sh) * c
    return total if covered == neighbours.bit_count() else None


def _briggs(p: Problem, a: int, b: int, factor: float) -> bool:
    shape = p.shape[a]
    adj_a, adj_b = p.adj[a], p.adj[b]
    common = adj_a & adj_b
    total = 0
    limit = p.placements[a]
    bound = _weight_bound(p, shape, adj_a | adj_b)
    if bound is not None and bound < limit:
        return True             # even every neighbour significant would not reach the limit
    for m in bits(adj_a | adj_b):
        w = p.wdeg[m]
        if common >> m & 1:
            w -= blocking_weight(p.shape[m], shape)    # m loses one of its two neighbours
        if _significant(p, m, factor, w):
            total += blocking_weight(shape, p.shape[m])
            if total >= limit:
                return False
    return True


def _george(p: Problem, a: int, b: int, factor: float) -> bool:
    """Every significant neighbour of ``a`` already interferes with ``b``."""
    adj_b = p.adj[b]
    for t in bits(p.adj[a] & ~adj_b):
        if t != b and _significant(p, t, factor):
            return False
    return True


def _precolored_conflict(p: Problem, node: int, other: int) -> bool:
    """Whether merging ``other`` into the precolored ``node`` would put it on a placement
    another precolored neighbour of ``other`` occupies (two convention registers of different
    calls, say): precolored placements are never checked again in select."""
    start = p.precolored.get(node)
    if start is None:
        return False
    mask = p.shape[node].mask(start)
    for m in bits(p.adj[other]):
        sm = p.precolored.get(m)
        if sm is not None and m != node and p.shape[m].mask(sm) & mask:
            return True
    return False


def _into_tuple(p: Problem, d: int, s: int) -> tuple[int, int, int] | None:
    """For a copy between a register tuple's member and a scalar node: (tuple node, scalar
    node, unit offset of that member), when the scalar could share the member's units — same
    shape, no interference with any member placed on those units, neither fixed."""
    a, b = p.find(d), p.find(s)
    if p.is_group[a] == p.is_group[b]:
        return None
    group, scalar, member = (a, b, d) if p.is_group[a] else (b, a, s)
    if group in p.precolored or scalar in p.precolored:
        return None
    shape = p.shape[scalar]
    reg_shape = p.reg_shape
    if shape != reg_shape[member]:
        return None
    at = p.offset[member]
    if at % shape.align:
        return None
    reg_adj = p.reg_adj
    for y in p.members[group]:
        if p.offset[y] < at + shape.units and at < p.offset[y] + reg_shape[y].units:
            for x in p.members[scalar]:
                if reg_adj[x] >> y & 1:
                    return None
    return group, scalar, at


def _briggs_tuple(p: Problem, group: int, scalar: int, factor: float) -> bool:
    shape = p.shape[group]
    total = 0
    placements, wdeg, shapes = p.placements, p.wdeg, p.shape
    limit = placements[group]
    neighbours = (p.adj[group] | p.adj[scalar]) & ~(1 << group)
    bound = _weight_bound(p, shape, neighbours)
    if bound is not None and bound < limit:
        return True
    for m in bits(neighbours):
        if wdeg[m] * factor >= placements[m]:            # _significant, inlined
            total += blocking_weight(shape, shapes[m])
            if total >= limit:
                return False
    return True


def _merge_tuple(p: Problem, target: tuple[int, int, int], factor: float) -> bool:
    """Merge the scalar of ``target`` (:func:`_into_tuple`) into its tuple when Briggs's or
    George's test allows; whether it did."""
    group, scalar, at = target
    if _briggs_tuple(p, group, scalar, factor) or _george(p, scalar, group, factor):
        p.merge(group, scalar, at)
        return True
    return False


def merge_into_tuple(p: Problem, d: int, s: int, factor: float = COALESCE_FACTOR) -> bool:
    """Merge whichever of the nodes of ``d`` and ``s`` is a scalar into the other, a register
    tuple, on the units of the member (``d`` or ``s``) it would share them with, under the
    same conditions as a copy between them (:func:`_into_tuple`, then Briggs's or George's
    test); whether it did. Registers left out of allocation are never merged."""
    if d in p.pinned or s in p.pinned:
        return False
    target = _into_tuple(p, d, s)
    return target is not None and _merge_tuple(p, target, factor)


def coalesce(p: Problem, factor: float = COALESCE_FACTOR,
             max_rounds: int = MAX_COALESCE_ITERATIONS) -> CoalesceStats:
    stats = CoalesceStats(moves=len(p.moves))
    moves = sorted(p.moves, key=lambda m: (-m[0], m[3]))
    pending = list(moves)
    for rnd in range(max_rounds):
        stats.rounds = rnd + 1
        changed = False
        still = []
        for move in pending:
            _, d, s, _ = move
            a, b = p.find(d), p.find(s)
            if a == b:
                continue
            target = _into_tuple(p, d, s)
            if target is not None:
                if _merge_tuple(p, target, factor):
                    changed = True
                else:
                    still.append(move)
                continue
            if (p.interferes(a, b) or p.shape[a] != p.shape[b] or p.is_group[a]
                    or p.is_group[b] or (a in p.precolored and b in p.precolored
                                         and p.precolored[a] != p.precolored[b])
                    or _precolored_conflict(p, a, b) or _precolored_conflict(p, b, a)):
                continue
            if _briggs(p, a, b, factor) or _george(p, a, b, factor) or \
                    _george(p, b, a, factor):
                keep, gone = (a, b) if (a in p.precolored or b not in p.precolored) else (b, a)
                p.merge(keep, gone)
                changed = True
            else:
                still.append(move)
        pending = still
        if not changed:
            break
    for _, d, s, _ in moves:
        a, b = p.find(d), p.find(s)
        if a == b:
            stats.coalesced += 1
        elif p.interferes(a, b) or p.shape[a] != p.shape[b]:
            stats.constrained += 1
    return stats
