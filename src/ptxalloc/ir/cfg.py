"""Control flow: basic blocks, dominators, natural loops and static block frequencies
(seed 000 phase 1's CFG; SPEC section 4.5 for the frequency estimate).

Blocks are cut at labels and after control transfers. ``bra`` (guarded or not), ``brx.idx``
with its ``.branchtargets`` list, ``ret``, ``exit`` and ``trap`` end a block; a guarded
``ret``/``exit``/``trap`` falls through too. Blocks unreachable from the entry are kept and
marked. Instructions get dense ids: their position in ``cfg.instrs`` (body order). Labels are
looked up function-wide: the parser has already resolved them by ``{ }`` scope and renamed
shadowing ones.

Dominators use the iterative algorithm of Cooper, Harvey and Kennedy ("A Simple, Fast Dominance
Algorithm", 2001). A back edge is an edge whose target dominates its source; each back edge's
natural loop is the target plus every block that reaches the source without passing the
target, and loops with one header are merged. A block's loop depth is the number of loops that
contain it. Retreating edges that are not back edges (irreducible control flow) form no loop;
``cfg.irreducible`` says whether there were any.

Block frequency (entry = 1.0): a branch splits 50/50, except that a branch with a loop back
edge takes it 90 % of the time. Within each loop, innermost first, the frequencies relative to
the header give the loop's cyclic probability ``c`` (the probability of returning to the
header), and the header then runs ``1 / (1 - c)`` times per entry (Wu and Larus, "Static Branch
Frequency and Program Profile Analysis", 1994), with ``c`` capped at 0.99.
"""

from __future__ import annotations

from ..errors import PtxSyntaxError
from .instruction import Instruction, Label
from .module import Function
from .operands import Sym
from ..util import gc_paused

_TERMINATORS = frozenset(("bra", "brx", "ret", "exit", "trap"))
BACK_EDGE_PROB = 0.9
MAX_CYCLIC_PROB = 0.99


class Block:
    """A basic block: its labels and instructions, ``first`` instruction id, successor and
    predecessor block ids, whether it is reachable from the entry, loop ``depth``, static
    frequency ``freq`` and innermost ``loop`` (-1 for none)."""

    __slots__ = ("id", "labels", "instrs", "first", "succs", "preds", "reachable", "depth",
                 "freq", "loop")

    def __init__(self, bid: int, first: int):
        self.id = bid
        self.labels: list[str] = []
        self.instrs: list[Instruction] = []
        self.first = first          # id of the first instruction (even if the block is empty)
        self.succs: list[int] = []
        self.preds: list[int] = []
        self.reachable = False
        self.depth = 0
        self.freq = 0.0
        self.loop = -1              # innermost loop containing the block, or -1

    def __repr__(self) -> str:
        return f"<block {self.id} {self.labels} n={len(self.instrs)} -> {self.succs}>"


class Loop:
    """A natural loop: ``header`` block, member ``blocks``, ``latches`` (sources of its back
    edges), enclosing loop ``parent`` (-1 for none) and nesting ``depth``."""

    __slots__ = ("id", "header", "blocks", "parent", "depth", "latches")

    def __init__(self, lid: int, header: int, blocks: set[int], latches: list[int]):
        self.id = lid
        self.header = header
        self.blocks = blocks
        self.latches = latches
        self.parent = -1
        self.depth = 1


class CFG:
    """The control-flow graph of one function."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.blocks: list[Block] = []
        self.instrs: list[Instruction] = []
        self.block_of: list[int] = []      # instruction id -> block id
        self.idom: list[int] = []
        self.loops: list[Loop] = []
        self.irreducible = False
        self.rpo: list[int] = []
        with gc_paused():
            self._build()
            self._reachability()
            self._dominators()
            self._loops()
            self._frequencies()

    # -- construction --

    def _build(self) -> None:
        fn = self.fn
        blocks = self.blocks
        instrs = self.instrs
        block_of = self.block_of
        cur = Block(0, 0)
        blocks.append(cur)
        label_block: dict[str, int] = {}
        ends: list[tuple[int, Instruction | None]] = []   # (block, its terminator or None)
        open_block = True
        for s in fn.body:
            t = type(s)
            if t is Instruction:
                if not open_block:
                    cur = Block(len(blocks), len(instrs))
                    blocks.append(cur)
                    open_block = True
                block_of.append(cur.id)
                instrs.append(s)
                cur.instrs.append(s)
                if s.base in _TERMINATORS:
                    ends.append((cur.id, s))
                    open_block = False
            elif t is Label:
                if open_block and cur.instrs:
                    ends.append((cur.id, None))
                    cur = Block(len(blocks), len(instrs))
                    blocks.append(cur)
                elif not open_block:
                    cur = Block(len(blocks), len(instrs))
                    blocks.append(cur)
                    open_block = True
                cur.labels.append(s.name)
                label_block[s.name] = cur.id
        if open_block:
            ends.append((cur.id, None))
        nblocks = len(blocks)
        targets = fn.branch_targets
        for bid, term in ends:
            b = blocks[bid]
            succs: list[int] = []
            fall = bid + 1 if bid + 1 < nblocks else -1
            if term is None:
                if fall >= 0:
                    succs.append(fall)
            else:
                op = term.opcode
                base = op.split(".", 1)[0]
                guarded = term.guard >= 0
                if base == "bra":
                    lab = _label_operand(term)
                    if lab is None or lab not in label_block:
                        raise _cfg_error(fn, term, f"branch to unknown label '{lab}'")
                    succs.append(label_block[lab])
                    if guarded and fall >= 0:
                        succs.append(fall)
                elif base == "brx":
                    tl = _label_operand(term)
                    names = targets.get(tl) if tl is not None else None
                    if names is None:
                        raise _cfg_error(fn, term, f"brx.idx with unknown target list '{tl}'")
                    for lab in names:
                        if lab not in label_block:
                            raise _cfg_error(fn, term, f"brx.idx target '{lab}' is not a label")
                        succs.append(label_block[lab])
                    if guarded and fall >= 0:
                        succs.append(fall)
                else:  # ret, exit, trap
                    if guarded and fall >= 0:
                        succs.append(fall)
            seen = set()
            for sid in succs:
                if sid not in seen:
                    seen.add(sid)
                    b.succs.append(sid)
                    blocks[sid].preds.append(bid)

    def _reachability(self) -> None:
        blocks = self.blocks
        order: list[int] = []
        stack = [(0, iter(blocks[0].succs))]
        blocks[0].reachable = True
        while stack:
            bid, it = stack[-1]
            for s in it:
                if not blocks[s].reachable:
                    blocks[s].reachable = True
                    stack.append((s, iter(blocks[s].succs)))
                    break
            else:
                stack.pop()
                order.append(bid)
        order.reverse()
        self.rpo = order

    def _dominators(self) -> None:
        blocks = self.blocks
        rpo = self.rpo
        index = [-1] * len(blocks)
        for i, b in enumerate(rpo):
            index[b] = i
        idom = [-1] * len(blocks)
        idom[0] = 0
        changed = True
        while changed:
            changed = False
            for b in rpo[1:]:
                new = -1
                for p in blocks[b].preds:
                    if idom[p] < 0:
                        continue
                    if new < 0:
                        new = p
                        continue
                    x, y = p, new
                    while x != y:
                        while index[x] > index[y]:
                            x = idom[x]
                        while index[y] > index[x]:
                            y = idom[y]
                    new = x
                if new != idom[b]:
                    idom[b] = new
                    changed = True
        self.idom = idom
        self._rpo_index = index

    def dominates(self, a: int, b: int) -> bool:
        """Whether block ``a`` dominates block ``b`` (both reachable)."""
        idom = self.idom
        if idom[b] < 0:
            return False
        while True:
            if b == a:
                return True
            if b == 0:
                return False
            b = idom[b]

    def _loops(self) -> None:
        blocks = self.blocks
        index = self._rpo_index
        by_header: dict[int, tuple[set[int], list[int]]] = {}
        for b in self.rpo:
            for s in blocks[b].succs:
                if index[s] <= index[b]:           # retreating edge
                    if self.dominates(s, b):
                        body, latches = by_header.setdefault(s, ({s}, []))
                        latches.append(b)
                        work = [b]
                        while work:
                            x = work.pop()
                            if x not in body:
                                body.add(x)
                                work.extend(p for p in blocks[x].preds if blocks[p].reachable)
                    else:
                        self.irreducible = True
        loops = [Loop(i, h, body, latches)
                 for i, (h, (body, latches)) in enumerate(sorted(by_header.items(),
                                                                 key=lambda kv: index[kv[0]]))]
        # nesting: the parent of a loop is the smallest other loop containing its header
        by_size = sorted(loops, key=lambda lp: len(lp.blocks))
        for lp in loops:
            for other in by_size:
                if other is not lp and lp.header in other.blocks and len(other.blocks) >= len(lp.blocks):
                    if other.header != lp.header:
                        lp.parent = other.id
                        break
        for lp in loops:
            d = 1
            p = lp.parent
            while p >= 0:
                d += 1
                p = loops[p].parent
            lp.depth = d
        for lp in by_size[::-1]:                   # outermost first, inner ones overwrite
            for b in lp.blocks:
                blocks[b].loop = lp.id
        for b in blocks:
            b.depth = loops[b.loop].depth if b.loop >= 0 else 0
        self.loops = loops

    def _frequencies(self) -> None:
        blocks = self.blocks
        loops = self.loops
        index = self._rpo_index
        back_edges = {(latch, lp.header) for lp in loops for latch in lp.latches}

        def edge_probs(b: int) -> list[tuple[int, float]]:
            succs = blocks[b].succs
            if not succs:
                return []
            if len(succs) == 1:
                return [(succs[0], 1.0)]
            back = [s for s in succs if (b, s) in back_edges]
            if back and len(back) < len(succs):
                rest = [s for s in succs if (b, s) not in back_edges]
                return ([(s, BACK_EDGE_PROB / len(back)) for s in back]
                        + [(s, (1 - BACK_EDGE_PROB) / len(rest)) for s in rest])
            return [(s, 1.0 / len(succs)) for s in succs]

        probs = [edge_probs(b.id) for b in blocks]
        multiplier = [1.0] * len(loops)          # header runs this many times per entry
        hdr_loop = {lp.header: lp.id for lp in loops}

        def propagate(region: set[int] | None, header: int) -> dict[int, float]:
            """Frequencies relative to ``header`` = 1 over a region, in RPO along forward
            edges only; headers of loops already solved are scaled by their multiplier (the
            region's own header is not, unless the region is the whole function)."""
            freq: dict[int, float] = {}
            for b in self.rpo:
                if region is not None and b not in region:
                    continue
                if b == header:
                    f = 1.0
                else:
                    f = 0.0
                    ib = index[b]
                    for p in blocks[b].preds:
                        if index[p] < ib and p in freq:
                            fp = freq[p]
                            for s, pr in probs[p]:
                                if s == b:
                                    f += fp * pr
                lid = hdr_loop.get(b)
                if lid is not None and (b != header or region is None):
                    f *= multiplier[lid]
                freq[b] = f
            return freq

        for lp in sorted(loops, key=lambda lp: -lp.depth):     # innermost first
            rel = propagate(lp.blocks, lp.header)
            cyclic = 0.0
            for latch in lp.latches:
                for s, pr in probs[latch]:
                    if s == lp.header:
                        cyclic += rel.get(latch, 0.0) * pr
            multiplier[lp.id] = 1.0 / (1.0 - min(cyclic, MAX_CYCLIC_PROB))
        freq = propagate(None, 0)
        for b in blocks:
            b.freq = freq.get(b.id, 0.0)

    # -- queries --

    def reachable_blocks(self) -> list[Block]:
        """The blocks reachable from the entry, in block order."""
        return [b for b in self.blocks if b.reachable]

    def instr_id(self, block: Block, k: int) -> int:
        """The id of the ``k``-th instruction of ``block``."""
        return block.first + k


def _label_operand(instr: Instruction) -> str | None:
    """The label of a ``bra`` or the target-list name of a ``brx.idx``."""
    for op in instr.ops:
        if type(op) is Sym:
            return op.text
    return None


def _cfg_error(fn: Function, instr: Instruction, message: str) -> PtxSyntaxError:
    return PtxSyntaxError(f"in function '{fn.name}': {message}", fn.filename, instr.line, 1)
