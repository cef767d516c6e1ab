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

from dataclasses import dataclass

from ..ir.cfg import CFG
from ..ir.registers import RegClass
from ..util import bits, gc_paused, transpose_or
from .liveness import Liveness

BANK_EDGE_WEIGHT = 2.0


@dataclass
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
        adj = [0] * nregs
        moves: list[tuple[int, int, int]] = []
        with gc_paused():
            for b in cfg.blocks:
                live = liveness.live_out[b.id]
                instrs = b.instrs
                first = b.first
                for i in range(len(instrs) - 1, -1, -1):
                    ins = instrs[i]
                    defs = ins.defs
                    if defs:
                        if ins.is_copy:
                            d = defs[0]
                            s = ins.uses[0]
                            moves.append((first + i, d, s))
                            others = live & ~(1 << s)
                        else:
                            others = live
                        if len(defs) > 1:
                            for d in defs:
                                others |= 1 << d
                        for d in defs:
                            m = gpr_mask if classes[d] != RegClass.PRED else pred_mask
                            adj[d] |= others & m & ~(1 << d)
                        if ins.guard < 0:
                            for d in defs:
                                live &= ~(1 << d)
                    for u in ins.uses:
                        live |= 1 << u
            # registers live on entry interfere with each other (implicit definitions at entry)
            entry = liveness.entry_live
            if entry:
                for v in bits(entry):
                    m = gpr_mask if classes[v] != RegClass.PRED else pred_mask
                    adj[v] |= entry & m & ~(1 << v)
            transpose_or(adj)                  # make the relation symmetric
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
