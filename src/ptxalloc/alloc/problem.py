"""The allocation problem both allocators solve (SPEC sections 2 and 4): *nodes* to place in
the register file, which nodes may not share units, which are joined by copies, and what each
costs to spill.

A node is a set of virtual registers placed together: one register, a register tuple (the
members of an ``ld.v4`` vector or an ``mma`` fragment, each at a fixed unit offset from the
node's start), or registers merged by coalescing. Nodes are kept as a union-find over register
ids; a node is named by its leader's id, so node adjacency can stay an int bitset over register
ids. A node's *shape* gives the units it spans and its alignment (:mod:`ptxalloc.target.units`).

Degrees are weighted for mixed widths (SPEC 4.4): a neighbour counts as many placements of this
node's shape as one of its own placements can block (``blocking_weight``). A node is trivially
colorable when its weighted degree is below the number of its placements in the budget — with
32-bit values only, the seeds' "degree < K".
"""

from __future__ import annotations

from ..analysis import FunctionAnalysis
from ..target.units import RegFile, Shape, blocking_weight, vreg_shape
from ..util import bits


class Problem:
    def __init__(self, analysis: FunctionAnalysis, regfile: RegFile,
                 precolored: dict[int, int] | None = None, pinned: set[int] = frozenset(),
                 prefer: dict[int, int] | None = None):
        fn = analysis.fn
        regs = fn.regs
        n = len(regs)
        self.analysis = analysis
        self.regfile = regfile
        self.nregs = n
        self.parent = list(range(n))
        self.offset = [0] * n                       # units from the node's start
        self.shape: list[Shape | None] = [vreg_shape(regs.classes[v], regs.vec[v])
                                          for v in range(n)]
        self.members: dict[int, list[int]] = {v: [v] for v in range(n)}
        self.is_group = [False] * n
        self.pinned = set(pinned)                   # registers left out of allocation
        costs = analysis.costs
        self.cost = list(costs)
        for g in analysis.tuples.groups:
            leader = g.members[0][0]
            shape = g.shape
            members = []
            for v, off in g.members:
                self.parent[v] = leader
                self.offset[v] = off
                members.append(v)
                if v != leader:
                    del self.members[v]
                    self.shape[v] = None
            self.members[leader] = members
            self.shape[leader] = shape
            self.is_group[leader] = True
            self.cost[leader] = sum(costs[v] for v in members)
        for v in self.pinned:
            self.members.pop(v, None)
        # node adjacency: translate member ids to leaders
        adj_v = analysis.graph.adj
        nonleader = 0
        for v in range(n):
            if self.parent[v] != v:
                nonleader |= 1 << v
        adj: dict[int, int] = {}
        pinned_mask = 0
        for v in self.pinned:
            pinned_mask |= 1 << v
        for leader, members in self.members.items():
            a = 0
            for v in members:
                a |= adj_v[v]
            if a & nonleader:
                extra = 0
                for m in bits(a & nonleader):
                    extra |= 1 << self.parent[m]
                a = (a & ~nonleader) | extra
            adj[leader] = a & ~(1 << leader) & ~pinned_mask
        self.adj = adj
        # precolored nodes: fixed start units (calling convention)
        self.fixed: dict[int, int] = {}
        for v, start in (precolored or {}).items():
            self.fixed[self.find(v)] = start - self.offset[v]
        # moves between nodes: (weight, destination node, source node, instruction id)
        self.moves: list[tuple[float, int, int, int]] = []
        cfg = analysis.cfg
        for iid, d, s in analysis.graph.moves:
            if d in self.pinned or s in self.pinned or d == s:
                continue
            w = cfg.blocks[cfg.block_of[iid]].freq
            self.moves.append((w, d, s, iid))
        # soft preferences: units a node would rather occupy (callee-saved registers for values
        # live across calls)
        self.prefer: dict[int, int] = {}
        self.prefer_by_reg = dict(prefer or {})
        for v, mask in (prefer or {}).items():
            if v not in self.pinned:
                self.prefer[self.find(v)] = mask
        self.placements = {leader: regfile.count(self.shape[leader]) for leader in self.members}
        # nodes by shape, so that a weighted degree is a few popcounts, not a walk
        self.shape_masks: dict[Shape, int] = {}
        for leader in self.members:
            sh = self.shape[leader]
            self.shape_masks[sh] = self.shape_masks.get(sh, 0) | (1 << leader)
        self.wdeg = {leader: self.weighted_degree(leader) for leader in self.members}

    def register_starts(self, start: dict[int, int]) -> dict[int, int]:
        """Every register's start unit under an assignment of nodes (the walk along alias
        chains, seed 004's sub_94FDD0): the copies coalesced into a node and a tuple's members
        take the node's start plus their own offset."""
        offset = self.offset
        return {v: s + offset[v] for n, s in start.items() for v in self.members[n]}

    # -- union-find --

    def find(self, v: int) -> int:
        p = self.parent
        while p[v] != v:
            p[v] = p[p[v]]
            v = p[v]
        return v

    def weighted_degree(self, node: int) -> int:
        shape = self.shape[node]
        a = self.adj[node]
        total = 0
        for sh, mask in self.shape_masks.items():
            common = a & mask
            if common:
                total += blocking_weight(shape, sh) * common.bit_count()
        return total

    def colorable(self, node: int) -> bool:
        return self.wdeg[node] < self.placements[node]

    def interferes(self, a: int, b: int) -> bool:
        return bool(self.adj[a] >> b & 1)

    def merge(self, keep: int, gone: int, at: int = 0) -> None:
        """Coalesce node ``gone`` into ``keep``: same shape and not interfering, or — ``at``
        units from the start of a register tuple ``keep`` — a scalar that does not interfere
        with the tuple members it would share units with."""
        adj = self.adj
        shape = self.shape[keep]
        gone_shape = self.shape[gone]
        keep_bit = 1 << keep
        common = adj[keep] & adj[gone]
        neighbours = bits(adj[gone] & ~keep_bit)
        for m in neighbours:
            am = adj[m] & ~(1 << gone)
            am |= keep_bit
            adj[m] = am
            if common >> m & 1:
                # m loses one neighbour: gone
                self.wdeg[m] -= blocking_weight(self.shape[m], gone_shape)
            elif at or gone_shape != shape:
                self.wdeg[m] = self.weighted_degree(m)
        adj[keep] = (adj[keep] | adj[gone]) & ~keep_bit & ~(1 << gone)
        del adj[gone]
        self.shape_masks[gone_shape] &= ~(1 << gone)
        self.parent[gone] = keep
        gone_members = self.members.pop(gone)
        for v in gone_members:
            self.offset[v] += at
        self.members[keep].extend(gone_members)
        self.cost[keep] += self.cost[gone]          # costs are >= 0: inf stays inf
        if gone in self.fixed:
            self.fixed[keep] = self.fixed.pop(gone)
        del self.wdeg[gone]
        del self.placements[gone]
        self.wdeg[keep] = self.weighted_degree(keep)
        if gone in self.prefer and keep not in self.prefer:
            self.prefer[keep] = self.prefer.pop(gone)
