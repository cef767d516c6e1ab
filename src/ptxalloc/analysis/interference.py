"""The interference graph (seed 000 phase 2; seed 002 "Interference Graph Construction",
"Graph Sparsity Analysis"; SPEC section 4.2).

Each block is scanned backward from its live-out set. At an instruction, every register it
defines interferes with every register live after it — a definition that is never used
interferes at its definition all the same — and the registers one instruction defines together
(``setp p|q``) interfere with each other. Then the definitions leave the live set (unless the
instruction is guarded: a guarded definition does not kill) and the uses join it: guards,
address registers and vector members are uses like any other.

For a copy ``mov d, s`` between registers of one class, ``d`` does not interfere with ``s``
there (seed 002 special case): they hold the same value. Copies are recorded as *moves* for
coalescing.

The scan finds each edge from the definition's side: ``d`` against what is live at its
definition. The other side -- every register defined while ``v`` is live -- is found per live
*segment* of ``v`` (the instructions of one block between its definition or the block's start
and its next use or the block's end) as the union of the registers those instructions define:
one range query of the block's definition masks, not one update per edge (on renderer.ptx's
110 functions the per-edge transposition took 0.33 s, issue 16): the exclusive or of two prefix
sums where the block defines each register once, else a sparse table. A copy's source does not
see the copy's destination: its segment skips the copy.

Nodes are virtual registers; adjacency is a list of int bitsets. Registers of different files
(predicates and general registers) never interfere. Aliasing between classes — a 32-bit value
against a 64-bit pair, two 16-bit halves in one register — is not encoded as extra edges: an edge
only says two values are live together, and the unit model (:mod:`ptxalloc.target.units`) says
whether their placements overlap.

Bank-conflict "constraint edges" (seed 000 phase 2b, weight 2.0) are kept apart as soft
preferences (SPEC 4.2): two registers read by the same instruction should sit in different banks
(bank = register index mod 32, seed 002 ``get_bank_index``). They steer the choice among free
placements; they never forbid one.
"""

from __future__ import annotations

from itertools import accumulate
from operator import xor

from ..ir import isa
from ..ir.isa import WGMMA_FENCE as FENCE
from ..ir.cfg import CFG
from ..ir.fence_stretch import fence_free_ahead
from ..ir.registers import RegClass
from ..records import record
from ..util import bits, gc_paused, mask_of as bitset_of
from .liveness import Liveness

BANK_EDGE_WEIGHT = 2.0


@record
class GraphStatistics:
    """Seed 002's GraphStatistics."""

    nodes: int
    edges: int
    density: float
    max_degree: int
    avg_degree: float
    moves: int

    def as_dict(self) -> dict:
        return {"nodes": self.nodes, "edges": self.edges, "density": round(self.density, 6),
                "max_degree": self.max_degree, "avg_degree": round(self.avg_degree, 3),
                "moves": self.moves}


class InterferenceGraph:
    """Interference between the virtual registers of one function.

    ``adj[v]`` is the bitset of registers interfering with ``v``; ``moves`` the list of copies
    as (instruction id, destination, source); ``bank_adj[v]`` the soft bank-conflict partners,
    found on first use (only Briggs's select above 32 registers asks for them).
    """

    def __init__(self, cfg: CFG, liveness: Liveness):
        fn = cfg.fn
        nregs = len(fn.regs)
        self.nregs = nregs
        classes = fn.regs.classes
        pred_mask = 0
        for v, c in enumerate(classes):
            if c == RegClass.PRED:
                pred_mask |= 1 << v
        full = (1 << nregs) - 1
        gpr_mask = full & ~pred_mask
        self.pred_mask = pred_mask
        self.gpr_mask = gpr_mask
        with gc_paused():
            adj, moves = _adjacency(cfg, liveness, classes, gpr_mask, pred_mask)
        _fence_edges(cfg, adj, gpr_mask)
        self.adj = adj
        self.moves = moves
        self._cfg = cfg
        self._bank: list[int] | None = None

    @property
    def bank_adj(self) -> list[int]:
        """Per register, the registers read with it by one instruction (sources other than
        the instruction's own destinations, predicates apart): soft bank-conflict partners."""
        if self._bank is None:
            classes = self._cfg.fn.regs.classes
            pred = RegClass.PRED
            bank = [0] * self.nregs
            for ins in self._cfg.instrs:
                uses = ins.uses
                if len(uses) > 1:
                    defs = ins.defs
                    srcs = [u for u in uses if classes[u] != pred and u not in defs]
                    if len(srcs) > 1:
                        # one mask per instruction, not one update per pair: a wgmma reads
                        # a hundred registers (issue 16: 37 % of a Triton kernel's time)
                        together = 0
                        for u in srcs:
                            together |= 1 << u
                        for u in srcs:
                            bank[u] |= together & ~(1 << u)
            self._bank = bank
        return self._bank

    def interferes(self, u: int, v: int) -> bool:
        return bool(self.adj[u] >> v & 1)

    def statistics(self) -> GraphStatistics:
        degrees = [a.bit_count() for a in self.adj]
        n = self.nregs
        total = sum(degrees)
        edges = total // 2
        max_edges = n * (n - 1) // 2
        return GraphStatistics(
            nodes=n, edges=edges, density=edges / max_edges if max_edges else 0.0,
            max_degree=max(degrees, default=0), avg_degree=total / n if n else 0.0,
            moves=len(self.moves))


def fenced_after(cfg: CFG, mask_of: list[int] | None = None) -> list[int]:
    """Per instruction id, the union of ``mask_of[v]`` (``1 << v`` without ``mask_of``) over
    the registers ``v`` that a ``wgmma.mma_async`` reachable from just after the instruction
    along a path with no ``wgmma.fence`` accesses asynchronously: a write right after the
    instruction into one of them comes after the fence that orders the warpgroup's writes
    before the ``wgmma`` (PTX ISA 9.7.15.5.1). The stretch is the checker's
    (:mod:`ptxalloc.verify.fences`), over the CFG: :func:`ptxalloc.ir.fence_stretch.fence_free_ahead`."""
    marks = wgmma_marks(cfg.instrs, mask_of)
    if marks is None:
        return [0] * len(cfg.instrs)
    return _ahead(cfg, marks)


def _ahead(cfg: CFG, marks: tuple[set[int], dict[int, int]]) -> list[int]:
    fences, gens = marks
    return fence_free_ahead(len(cfg.instrs), [(b.first, len(b.instrs)) for b in cfg.blocks],
                            [b.succs for b in cfg.blocks], fences, gens)


def wgmma_marks(instrs: list, mask_of: list[int] | None = None
                ) -> tuple[set[int], dict[int, int]] | None:
    """The positions of the unguarded ``wgmma.fence`` instructions (a guarded one may not
    run) and, per ``wgmma.mma_async``, the union of ``mask_of[v]`` (``1 << v`` without it)
    over the registers it accesses asynchronously; None for a function without ``wgmma`` (the
    common case, on every interference build: nothing more is built)."""
    if not any(ins.base == "wgmma" for ins in instrs):
        return None
    fences: set[int] = set()
    gens: dict[int, int] = {}
    for p, ins in enumerate(instrs):
        if ins.base != "wgmma":
            continue
        if ins.opcode.startswith(FENCE):
            if ins.guard < 0:       # a guarded fence may not run: a branch over a fence
                fences.add(p)
        elif ins.opcode.startswith("wgmma.mma_async"):
            got = isa.async_operands(ins)
            mask = 0
            if got is not None:
                for v in got[0]:
                    mask |= 1 << v if mask_of is None else mask_of[v]
            gens[p] = mask
    return fences, gens


def _fence_edges(cfg: CFG, adj: list[int], gpr_mask: int) -> None:
    """Edges between the registers a ``wgmma.mma_async`` accesses asynchronously and every
    general register defined or read where a path leads to it with no ``wgmma.fence`` between
    (:func:`fenced_after`): the fence must come between any access of a register by the thread
    and a ``wgmma`` that accesses the same register (PTX ISA 9.7.15.5.1), so no other value
    may be written or read there in between — not even while an accumulator the wgmma only
    writes is dead. The reads of a ``wgmma`` instruction itself are its own (the ISA's
    exception for accumulators across ``wgmma.mma_async`` of one shape; descriptors are 64-bit
    registers, another PTX register file). The wgmma's registers are general registers: a
    predicate there gets no edge (files apart)."""
    marks = wgmma_marks(cfg.instrs)
    if marks is None:
        return                      # no wgmma (the common case, on every interference build)
    after = _ahead(cfg, marks)
    # the mask changes only at fences and wgmmas: one update per run of equal masks (a wgmma
    # accesses a hundred registers), not one per definition and register
    fenced = accessed = 0
    for ins, mask in zip(cfg.instrs + [None], after + [0]):
        mask &= gpr_mask
        if mask != fenced:
            for a in bits(fenced):
                adj[a] |= accessed & ~(1 << a)
            fenced, accessed = mask, 0
        if fenced:
            for d in ins.defs:
                if gpr_mask >> d & 1:
                    adj[d] |= fenced & ~(1 << d)
                    accessed |= 1 << d
            if ins.base != "wgmma":
                for u in ins.uses:
                    if gpr_mask >> u & 1:
                        adj[u] |= fenced & ~(1 << u)
                        accessed |= 1 << u


def _adjacency(cfg: CFG, liveness: Liveness, classes, gpr_mask: int,
               pred_mask: int) -> tuple[list[int], list[tuple[int, int, int]]]:
    """The symmetric adjacency bitsets and the moves of the module docstring's scan.

    Membership in the live set is one flag per register (a bytearray, carried from block to
    block as :class:`~ptxalloc.analysis.pressure.Pressure`'s walk carries it: the blocks are
    scanned last first and only the registers where a block's live-out set differs from the
    live-in set of the block after it are flipped); the bitset of the same set, which the
    definitions' rows take whole, changes by one precomputed ``1 << v`` per step (issue 16:
    a shift and a mask per operand were most of the scan's time on renderer.ptx)."""
    nregs = len(classes)
    pred = RegClass.PRED
    adj = [0] * nregs           # d -> what is live where d is defined
    into = [0] * nregs          # v -> what is defined where v is live (the other side)
    bit = [1 << v for v in range(nregs)]
    nblocks = len(cfg.blocks)
    block_moves: list[list[tuple[int, int, int]]] = [[]] * nblocks
    through = [0] * nblocks     # per block, the values live through it untouched
    wholes = [0] * nblocks      # per block, every register it defines
    flag = bytearray(nregs)     # the live set, one flag per register
    state = 0                   # the same set as a bitset, between blocks
    live_out = liveness.live_out
    live_in = liveness.live_in
    for b in reversed(cfg.blocks):
        instrs = b.instrs
        m = len(instrs)
        live = live_out[b.id]
        if not m:
            through[b.id] = live
            continue
        if state != live:
            for v in bits(state ^ live):
                flag[v] ^= 1
        first = b.first
        # per instruction the registers it defines, and ranges of them (_RangeOr)
        dm = [bit[ds[0]] if len(ds) == 1 else bitset_of(ds) for ds in
              [ins.defs for ins in instrs]]
        query = _range_or(dm)
        moves: list[tuple[int, int, int]] = []
        top: dict[int, int] = {}    # live value -> last instruction of its open segment
        for i in range(m - 1, -1, -1):
            ins = instrs[i]
            defs = ins.defs
            uses = ins.uses
            if defs:
                others = live
                if ins.is_copy:
                    d = defs[0]
                    s = uses[0]
                    moves.append((first + i, d, s))
                    if flag[s]:
                        others = live ^ bit[s]
                        if s != d:
                            # the source's segment skips the copy: it does not see d here
                            t = top.get(s, m - 1)
                            if t > i:
                                into[s] |= query(i + 1, t)
                            top[s] = i - 1
                if len(defs) > 1:
                    others |= dm[i]
                # the other file's registers and d itself are masked off once per register at
                # the end (an OR distributes over the mask), not at every definition
                for d in defs:
                    adj[d] |= others
                if ins.guard < 0:
                    for d in defs:
                        if flag[d]:             # its segment starts at this definition
                            into[d] |= query(i, top.pop(d, m - 1))
                            flag[d] = 0
                            live ^= bit[d]
            for u in uses:
                if not flag[u]:
                    flag[u] = 1
                    live |= bit[u]
                    top[u] = i - 1
        # the segments open at the block's start; a value whose segment in this block is not
        # the whole block and that is live at its start has one open (it joined ``top`` at
        # its last use, or at a copy it is the source of, and left only at a definition)
        untouched = live
        for v, t in top.items():
            untouched ^= bit[v]
            if t >= 0:
                into[v] |= query(0, t)
        through[b.id] = untouched
        wholes[b.id] = query(0, m - 1)
        block_moves[b.id] = moves
        state = live_in[b.id]
    moves = [mv for got in block_moves for mv in got]
    # a value live through consecutive blocks sees what they define: one query per run of
    # blocks rather than one update per block
    runs = _RangeOr(wholes)
    run_start = {}
    prev = 0
    for bid in range(nblocks):
        cur = through[bid]
        for v in bits(cur & ~prev):
            run_start[v] = bid
        nxt = through[bid + 1] if bid + 1 < nblocks else 0
        ending = cur & ~nxt
        if ending:
            for v in bits(ending):
                into[v] |= runs.query(run_start[v], bid)
        prev = cur
    # registers live on entry interfere with each other (implicit definitions at entry)
    entry = liveness.entry_live
    if entry:
        for v in bits(entry):
            adj[v] |= entry
    for v in range(nregs):
        a = adj[v] | into[v]
        if a:
            fm = gpr_mask if classes[v] != pred else pred_mask
            adj[v] = a & fm & ~bit[v]
    return adj, moves


def _range_or(masks: list[int]):
    """``query(i, j)``: the union of ``masks[i..j]``. Where no register is in two of the masks
    (a block that defines each register once: most blocks) the union of a range is the
    exclusive or of two prefix sums, one operation a query; otherwise :class:`_RangeOr`."""
    prefix = list(accumulate(masks, xor, initial=0))
    if prefix[-1].bit_count() != sum(map(int.bit_count, masks)):
        return _RangeOr(masks).query

    def query(i: int, j: int) -> int:
        return prefix[j + 1] ^ prefix[i]
    return query


class _RangeOr:
    """The union of ``masks[i..j]`` for any ``i <= j``: short ranges by a loop, longer ones
    from a sparse table (level ``l`` holds the unions of ``2**l`` consecutive masks), built on
    the first long query."""

    __slots__ = ("masks", "levels")

    SHORT = 8

    def __init__(self, masks: list[int]):
        self.masks = masks
        self.levels: list[list[int]] | None = None

    def query(self, i: int, j: int) -> int:
        masks = self.masks
        if j - i < self.SHORT:
            x = 0
            for k in range(i, j + 1):
                x |= masks[k]
            return x
        levels = self.levels
        if levels is None:
            levels = self.levels = [masks]
            prev = masks
            span = 1
            while 2 * span <= len(masks):
                prev = [prev[k] | prev[k + span] for k in range(len(prev) - span)]
                levels.append(prev)
                span *= 2
        level = (j - i + 1).bit_length() - 1
        row = levels[level]
        return row[i] | row[j - (1 << level) + 1]
