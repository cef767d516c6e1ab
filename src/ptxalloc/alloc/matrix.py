"""Which nodes occupy which register units: the one occupancy structure every allocator,
compaction and the driver's relief share (SPEC section 2, the register-unit model of
:mod:`ptxalloc.target.units`; LLVM's ``LiveRegMatrix``).

A :class:`UnitMatrix` holds an assignment of nodes to start units. Per unit it keeps the bitset
of the nodes assigned over it, so that the nodes a placement would collide with are a few ORs
(:meth:`~UnitMatrix.conflicts`); and it keeps the bitset of assigned nodes, so that the units a
node may not take — those of its assigned neighbours — are one walk over those neighbours
(:meth:`~UnitMatrix.forbidden`). A conflict is always an *interference* (``adj``) on a shared
unit: two nodes that do not interfere may share units (coalesced copies do).

The general registers and the predicates are two files with their own unit numbers; the
interference graph never joins nodes of different files, so one matrix serves both.

Not to be confused with :mod:`ptxalloc.target.occupancy`, the hardware's warps per SM.
"""

from __future__ import annotations

from functools import reduce
from operator import or_

from ..util import bits


class UnitMatrix:
    """An assignment of nodes to register units, with the queries allocators ask of it.

    ``shape`` maps a node to its :class:`Shape` (a list indexed by node id, or a dict);
    ``adj`` maps a node to the bitset of the nodes it interferes with; ``size`` is the number
    of units to track (the larger file's)."""

    __slots__ = ("shape", "adj", "occ", "start", "held", "assigned")

    def __init__(self, shape, adj, size: int, start: dict[int, int] | None = None):
        self.shape = shape
        self.adj = adj
        self.occ = [0] * size               # per unit: bitset of the nodes assigned over it
        self.start: dict[int, int] = {}     # node -> start unit
        self.held: dict[int, int] = {}      # node -> the unit mask it holds (start and shape)
        self.assigned = 0                   # bitset of the assigned nodes
        for n, s in (start or {}).items():
            self.assign(n, s)

    @classmethod
    def for_problem(cls, p, start: dict[int, int] | None = None) -> "UnitMatrix":
        """A matrix over the nodes of a :class:`~ptxalloc.alloc.api.Problem`, holding
        ``start`` (default: the precolored nodes)."""
        start = p.precolored if start is None else start
        size = max(2 * p.regfile.k, p.regfile.pred_regs)
        shape = p.shape
        for n, s in start.items():
            size = max(size, s + shape[n].units)
        return cls(shape, p.adj, size, start)

    def assign(self, n: int, s: int) -> None:
        """Put node ``n`` on the units of its shape from ``s``."""
        self.start[n] = s
        self.held[n] = self.shape[n].mask(s)
        bit = 1 << n
        self.assigned |= bit
        occ = self.occ
        for u in range(s, s + self.shape[n].units):
            occ[u] |= bit

    def unassign(self, n: int) -> int:
        """Take node ``n`` off its units; returns the start it had."""
        s = self.start.pop(n)
        del self.held[n]
        bit = 1 << n
        self.assigned &= ~bit
        occ = self.occ
        keep = ~bit
        for u in range(s, s + self.shape[n].units):
            occ[u] &= keep
        return s

    def units(self, n: int) -> int:
        """The unit mask of an assigned node."""
        return self.held[n]

    def forbidden(self, n: int) -> int:
        """The units held by assigned nodes that interfere with ``n``."""
        return reduce(or_, map(self.held.__getitem__, bits(self.adj[n] & self.assigned)), 0)

    def conflicts(self, n: int, s: int, units: int | None = None) -> int:
        """The bitset of assigned nodes interfering with ``n`` on the units a placement of
        ``n`` at ``s`` would take (``units`` of them, default its shape's)."""
        occ = self.occ
        c = 0
        for u in range(s, s + (self.shape[n].units if units is None else units)):
            c |= occ[u]
        return c & self.adj[n]

    def lowest_free(self, placements: list[tuple[int, int]], forbidden: int) -> int | None:
        """The start of the first placement (``RegFile.placements`` order: lowest first)
        that takes none of the ``forbidden`` units; None when all do."""
        for s, mask in placements:
            if not mask & forbidden:
                return s
        return None

    def lowest_free_preferring(self, placements: list[tuple[int, int]], forbidden: int,
                               want: int | None) -> int | None:
        """:meth:`lowest_free`, but a placement inside the ``want`` units (a value live
        across calls: the callee-saved registers) first when one is free."""
        if want:
            s = self.lowest_free([(s, m) for s, m in placements if m & want == m], forbidden)
            if s is not None:
                return s
        return self.lowest_free(placements, forbidden)

