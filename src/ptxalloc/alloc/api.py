"""The allocator contract: what every allocator is given, what it returns, and where the
allocators are listed (SPEC sections 2 and 4; seed 000 "Constraint Systems", seed 004 "Register
Assignment: sub_94FDD0").

* :class:`Problem` — the allocation problem, in plain arrays: the nodes to place in the
  register file, their shapes, which may not share units, the copies that join them, what each
  costs to spill, the program points with their pressure and live intervals, and the
  precolouring. It is built from an analysis by :meth:`Problem.from_analysis`, but keeps no
  reference to the function, its CFG or the analysis: an allocator sees the program only
  through these arrays.
* :class:`Coloring` — an allocator's answer: a start unit per node, and the nodes it could not
  place (the driver spills them and runs another round).
* :class:`Allocator` — what an allocator provides: a name, a one-line description, whether the
  driver should coalesce copies before calling it, and ``color(problem, options)``; an
  allocator that keeps state across the rounds of one function opens a
  :class:`~ptxalloc.alloc.session.Session` instead (:meth:`Allocator.open`).
* the registry — :func:`register`, :func:`get`, :func:`names`; the CLI's ``--allocator``, the
  fuzz and corpus tests and the benches read it. The built-in allocators register themselves
  when their module is imported; :data:`BUILTIN` lists those modules.

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

import importlib
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..records import field, record
from ..target.units import RegFile, Shape, blocking_weight, vreg_shape
from ..util import bits

if TYPE_CHECKING:
    from ..analysis import FunctionAnalysis
    from ..ir.module import Function
    from .session import Session


@record
class Coloring:
    """An allocator's answer for one round: a start unit for every node it placed (``start``)
    and the nodes it could not place (``spilled``: the driver spills or relieves them and runs
    another round); ``stack`` and ``optimistic`` record Briggs's simplify order for the
    report, and ``optimal`` whether the register count is proven minimal (None: unknown)."""

    start: dict[int, int] = field(default_factory=dict)   # node -> start unit
    spilled: list[int] = field(default_factory=list)      # nodes without a placement
    stack: list[int] = field(default_factory=list)        # removal (or coloring) order
    optimistic: int = 0                                   # spill candidates pushed anyway
    optimal: bool | None = None                           # register count proven minimal


@record
class Program:
    """The program points of one function in plain arrays: point ``i`` is instruction id ``i``
    (blocks in layout order, each block's instructions consecutive)."""

    defs: list[list[int]]                 # per point: registers written
    uses: list[list[int]]                 # per point: registers read
    guarded: list[bool]                   # per point: the instruction has a guard predicate
    blocks: list[tuple[int, int, int, int]]   # per block: (first point, end, live-in, live-out)
    order: list[int]                      # block indices in reverse post-order, then unreachable
    gpr_pressure: list[float]             # per point: 32-bit registers that must coexist
    pred_pressure: list[int]              # per point: predicates that must coexist
    max_live: int = 0                     # the highest pressure of general registers
    _intervals: list[tuple[int, int] | None] | None = field(default=None, repr=False)

    @classmethod
    def from_analysis(cls, an: "FunctionAnalysis") -> "Program":
        cfg = an.cfg
        instrs = cfg.instrs
        live_in, live_out = an.liveness.live_in, an.liveness.live_out
        reachable = cfg.rpo + [b.id for b in cfg.blocks if not b.reachable]
        return cls([ins.defs for ins in instrs], [ins.uses for ins in instrs],
                   [ins.guard >= 0 for ins in instrs],
                   [(b.first, b.first + len(b.instrs), live_in[b.id], live_out[b.id])
                    for b in cfg.blocks],
                   reachable, an.pressure.gpr, an.pressure.pred, an.pressure.max_live)

    def intervals(self, nregs: int) -> list[tuple[int, int] | None]:
        """Per register, the smallest interval [first, last] of points that holds every
        point where it is live, defined or read (None for a register that never is): the
        live intervals of linear scan (Poletto and Sarkar 1999)."""
        got = self._intervals
        if got is not None:
            return got
        lo = [-1] * nregs
        hi = [-1] * nregs

        def touch(v: int, i: int) -> None:
            if lo[v] < 0 or i < lo[v]:
                lo[v] = i
            if i > hi[v]:
                hi[v] = i
        defs, uses = self.defs, self.uses
        for first, end, live_in, live_out in self.blocks:
            if end == first:
                continue
            for v in bits(live_in):
                touch(v, first)
            for v in bits(live_out):
                touch(v, end - 1)
            for i in range(first, end):
                for v in defs[i]:
                    touch(v, i)
                for v in uses[i]:
                    touch(v, i)
        got = [(a, b) if a >= 0 else None for a, b in zip(lo, hi)]
        self._intervals = got
        return got


class Problem:
    """The allocation problem of one round, in plain arrays (no reference to the function or
    its CFG): the register file within the budget, every register's shape, interference, spill
    cost and size, the register tuples, the copies (weighted by block frequency), the program
    points, the precolored, pinned and preferred placements. ``reg_*`` arrays are indexed by
    register id and describe the registers as the analysis found them; the node arrays
    (``shape``, ``adj``, ``cost``, ``members``, ...) change as coalescing merges nodes."""

    def __init__(self, regfile: RegFile, reg_shape: list[Shape], reg_adj: list[int],
                 reg_cost: list[float], reg_bytes: list[int],
                 groups: list[tuple[Shape, list[tuple[int, int]]]],
                 moves: list[tuple[float, int, int, int]], program: Program,
                 precolored: dict[int, int] | None = None, pinned: set[int] = frozenset(),
                 prefer: dict[int, int] | None = None, bank_adj: list[int] | None = None):
        n = len(reg_shape)
        self.regfile = regfile
        self.nregs = n
        self.reg_shape = reg_shape              # each register's own shape
        self.reg_adj = reg_adj                  # interference between registers
        self.reg_cost = reg_cost                # each register's spill cost
        self.reg_bytes = reg_bytes              # each register's width in bytes
        self.bank_adj = bank_adj                # soft bank-conflict partners (above 32 regs)
        self.program = program
        self.parent = list(range(n))
        self.merges = 0                             # nodes coalesced away (:meth:`merge`)
        self.offset = [0] * n                       # units from the node's start
        self.shape: list[Shape | None] = list(reg_shape)
        self.members: dict[int, list[int]] = {v: [v] for v in range(n)}
        self.is_group = [False] * n
        self.pinned = set(pinned)                   # registers left out of allocation
        self.cost = list(reg_cost)
        for shape, group in groups:
            leader = group[0][0]
            members = []
            for v, off in group:
                self.parent[v] = leader
                self.offset[v] = off
                members.append(v)
                if v != leader:
                    del self.members[v]
                    self.shape[v] = None
            self.members[leader] = members
            self.shape[leader] = shape
            self.is_group[leader] = True
            self.cost[leader] = sum(reg_cost[v] for v in members)
        for v in self.pinned:
            self.members.pop(v, None)
        # node adjacency: translate member ids to leaders
        nonleader = 0
        for v in range(n):
            if self.parent[v] != v:
                nonleader |= 1 << v
        adj: dict[int, int] = {}
        pinned_mask = 0
        for v in self.pinned:
            pinned_mask |= 1 << v
        # a node interferes with a tuple when one of its registers interferes with a member
        # of the tuple other than the leader: found from the tuple's side (interference is
        # symmetric), one walk over the neighbours of each tuple's other members, instead of
        # one over each node's neighbours among all tuples' members
        into_tuple: dict[int, int] = {}         # node -> the tuples (leader bits) it meets
        parent = self.parent
        for leader, members in self.members.items():
            if self.is_group[leader]:
                meets = 0
                for v in members:
                    if v != leader:
                        meets |= reg_adj[v]
                bit = 1 << leader
                for y in bits(meets):
                    node = parent[y]
                    into_tuple[node] = into_tuple.get(node, 0) | bit
        for leader, members in self.members.items():
            a = 0
            for v in members:
                a |= reg_adj[v]
            if a & nonleader:
                a = (a & ~nonleader) | into_tuple.get(leader, 0)
            adj[leader] = a & ~(1 << leader) & ~pinned_mask
        self.adj = adj
        # precolored nodes: fixed start units (calling convention)
        self.precolored: dict[int, int] = {}
        for v, start in (precolored or {}).items():
            self.precolored[self.find(v)] = start - self.offset[v]
        # moves between nodes: (weight, destination node, source node, instruction id)
        self.moves = [m for m in moves
                      if m[1] not in self.pinned and m[2] not in self.pinned and m[1] != m[2]]
        # soft preferences: units a node would rather occupy (callee-saved registers for values
        # live across calls)
        self.prefer: dict[int, int] = {}
        self.prefer_by_reg = dict(prefer or {})
        for v, mask in (prefer or {}).items():
            if v not in self.pinned:
                self.prefer[self.find(v)] = mask
        count = {sh: regfile.count(sh) for sh in set(self.shape) if sh is not None}
        self.placements = {leader: count[self.shape[leader]] for leader in self.members}
        # nodes by shape, so that a weighted degree is a few popcounts, not a walk
        self.shape_masks: dict[Shape, int] = {}
        for leader in self.members:
            sh = self.shape[leader]
            self.shape_masks[sh] = self.shape_masks.get(sh, 0) | (1 << leader)
        self.wdeg = self._weighted_degrees()

    @classmethod
    def from_analysis(cls, analysis: "FunctionAnalysis", regfile: RegFile,
                      precolored: dict[int, int] | None = None, pinned: set[int] = frozenset(),
                      prefer: dict[int, int] | None = None) -> "Problem":
        """The problem of a function as ``analysis`` found it: registers, tuples, interference,
        copies weighted by their block's frequency, spill costs, program points."""
        regs = analysis.fn.regs
        cfg = analysis.cfg
        classes, vec = regs.classes, regs.vec
        reg_shape = [vreg_shape(classes[v], vec[v]) for v in range(len(regs))]
        groups = [(g.shape, g.members) for g in analysis.tuples.groups]
        blocks, block_of = cfg.blocks, cfg.block_of
        moves = [(blocks[block_of[iid]].freq, d, s, iid) for iid, d, s in analysis.graph.moves]
        from .briggs import BANKS
        bank_adj = analysis.graph.bank_adj if regfile.k > BANKS else None
        return cls(regfile, reg_shape, analysis.graph.adj, analysis.costs,
                   _reg_bytes(regs), groups, moves, Program.from_analysis(analysis),
                   precolored, pinned, prefer, bank_adj)

    def copy(self) -> "Problem":
        """A copy that coalescing and coloring change apart from this one: what a fresh
        :meth:`from_analysis` of the same analysis and inputs builds, without translating the
        adjacency and weighing the degrees again (issue 16: the driver colors one round's
        problem up to three times). The per-register inputs and the program, which nothing
        changes, are shared."""
        new = object.__new__(Problem)
        new.__dict__.update(self.__dict__)
        new.parent = list(self.parent)
        new.offset = list(self.offset)
        new.shape = list(self.shape)
        new.members = {n: list(m) for n, m in self.members.items()}
        new.is_group = list(self.is_group)
        new.pinned = set(self.pinned)
        new.cost = list(self.cost)
        new.adj = dict(self.adj)
        new.precolored = dict(self.precolored)
        new.moves = list(self.moves)
        new.prefer = dict(self.prefer)
        new.prefer_by_reg = dict(self.prefer_by_reg)
        new.placements = dict(self.placements)
        new.shape_masks = dict(self.shape_masks)
        new.wdeg = dict(self.wdeg)
        return new

    def register_starts(self, start: dict[int, int]) -> dict[int, int]:
        """Every register's start unit under an assignment of nodes (the walk along alias
        chains, seed 004's sub_94FDD0): the copies coalesced into a node and a tuple's members
        take the node's start plus their own offset."""
        offset = self.offset
        return {v: s + offset[v] for n, s in start.items() for v in self.members[n]}

    def intervals(self) -> dict[int, tuple[int, int]]:
        """Per node, the live interval of its members together (:meth:`Program.intervals`);
        a node none of whose members is ever live gets none."""
        per_reg = self.program.intervals(self.nregs)
        out: dict[int, tuple[int, int]] = {}
        for n, members in self.members.items():
            lo = hi = None
            for v in members:
                iv = per_reg[v]
                if iv is not None:
                    lo = iv[0] if lo is None else min(lo, iv[0])
                    hi = iv[1] if hi is None else max(hi, iv[1])
            if lo is not None:
                out[n] = (lo, hi)
        return out

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

    def _weighted_degrees(self) -> dict[int, int]:
        """Every node's :meth:`weighted_degree`, the terms of each shape found once: the
        shapes weighing nothing dropped, and the most common shape's weight counted for all
        neighbours at once (one popcount), the others by the difference from it."""
        masks = self.shape_masks
        if not masks:
            return {}
        everyone = 0
        for mask in masks.values():
            everyone |= mask
        common = max(masks, key=lambda sh: masks[sh].bit_count())
        terms: dict = {}        # shape -> (weight of the common shape, [(mask, difference)])
        out = {}
        adj, shapes = self.adj, self.shape
        for leader in self.members:
            shape = shapes[leader]
            got = terms.get(shape)
            if got is None:
                base = blocking_weight(shape, common)
                got = terms[shape] = (base, [(mask, w - base) for sh, mask in masks.items()
                                             if (w := blocking_weight(shape, sh)) != base])
            base, rest = got
            a = adj[leader]
            total = base * (a & everyone).bit_count() if base else 0
            for mask, diff in rest:
                total += diff * (a & mask).bit_count()
            out[leader] = total
        return out

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
        wdeg, shapes = self.wdeg, self.shape
        reshaped = at or gone_shape != shape
        not_gone = ~(1 << gone)
        for m in neighbours:
            adj[m] = adj[m] & not_gone | keep_bit
            if common >> m & 1:
                # m loses one neighbour: gone
                wdeg[m] -= blocking_weight(shapes[m], gone_shape)
            elif reshaped:
                # m trades neighbour gone for keep, of another shape
                sm = shapes[m]
                wdeg[m] += blocking_weight(sm, shape) - blocking_weight(sm, gone_shape)
        adj[keep] = (adj[keep] | adj[gone]) & ~keep_bit & not_gone
        del adj[gone]
        self.shape_masks[gone_shape] &= not_gone
        self.parent[gone] = keep
        self.merges += 1
        gone_members = self.members.pop(gone)
        for v in gone_members:
            self.offset[v] += at
        self.members[keep].extend(gone_members)
        self.cost[keep] += self.cost[gone]          # costs are >= 0: inf stays inf
        if gone in self.precolored:
            self.precolored[keep] = self.precolored.pop(gone)
        del self.wdeg[gone]
        del self.placements[gone]
        self.wdeg[keep] = self.weighted_degree(keep)
        if gone in self.prefer and keep not in self.prefer:
            self.prefer[keep] = self.prefer.pop(gone)


def _reg_bytes(regs) -> list[int]:
    from ..ir.build import width_bytes
    return [width_bytes(regs, v) for v in range(len(regs))]


# -- the allocators ----------------------------------------------------------------------------

@runtime_checkable
class Allocator(Protocol):
    """What an allocator provides. ``coalesces``: whether the driver should run conservative
    coalescing (:mod:`coalesce`) on the problem before each ``color``. ``open`` gives the
    driver the object it calls each round for one function; the default wraps ``color``."""

    name: str
    description: str
    coalesces: bool

    def color(self, problem: Problem, options) -> Coloring:
        ...

    def open(self, fn: "Function", budget: int, options) -> "Session":
        from .session import PlainSession
        return PlainSession(fn, budget, options, self.color)


#: the modules of the built-in allocators; each registers its allocator when imported
BUILTIN = ("briggs", "fatpoint", "linear", "optimal")

_REGISTRY: dict[str, Allocator] = {}
_loaded = False


def register(allocator: Allocator) -> Allocator:
    """Add ``allocator`` under its name (a later registration of the same name replaces it)."""
    _REGISTRY[allocator.name] = allocator
    return allocator


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN:
            importlib.import_module(f"{__package__}.{module}")


def get(name: str) -> Allocator:
    """The allocator registered as ``name``; KeyError when there is none. A built-in one is
    found by importing its module alone: ``allocate`` imports no allocator it does not run
    (start-up, issue 16)."""
    if name not in _REGISTRY:
        if name in BUILTIN:
            importlib.import_module(f"{__package__}.{name}")
        else:
            _load_builtin()
    return _REGISTRY[name]


def names(heuristics_only: bool = False) -> list[str]:
    """The registered allocators' names: the built-in ones in :data:`BUILTIN` order, then the
    others in the order they registered. ``heuristics_only`` leaves out the exact ones (an
    allocator with ``exact = True``, the yardstick of ``grade``: a solver with a time limit per
    function is for small functions, not for corpus-wide runs)."""
    _load_builtin()
    chosen = [n for n in _REGISTRY
              if not (heuristics_only and getattr(_REGISTRY[n], "exact", False))]
    return sorted(chosen, key=lambda n: (BUILTIN.index(n) if n in BUILTIN else len(BUILTIN)))
