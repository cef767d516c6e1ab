"""Live-range splitting at block ends, to reach MaxLive (seed 002 "Live Range Splitting";
issue 13, docs/decisions.md "Splitting at block ends to reach MaxLive").

Compaction (:mod:`compact`) recolors a finished allocation to the fewest registers it can find,
but the interference graph of the code as written can need more registers than MaxLive when
it is not chordal: a loop-carried register redefined in the loop (an accumulator ``fma %f1,
.., %f1``: its range wraps around the back edge, a circular-arc graph), a register assigned
on two paths and read after the join. Code in SSA form has a chordal graph that a coloring in
dominance order fills with MaxLive registers; the copies that leave SSA are what joins the
pieces again. This module makes that split explicit:

* inside a block, each full unguarded definition of a register starts a new *segment*, with a
  register of its own (a guarded or partial definition continues the segment it updates);
* a block that redefines a register live out of it copies the last segment into the
  register's *out name* at its end (before its branch), and the out names of a block, the in
  names of its successors and the out names of their other predecessors are one register
  (a phi and its arguments, joined where they meet: no copy on an edge, so no edge needs
  splitting and no branch changes);
* where that is not enough, right before each definition of a value wider than 32 bits (or
  of a tuple's member) the 32-bit registers live across it are copied into new segments too,
  so that a narrow value can leave the aligned pair the wide one needs (the alignment, not
  the graph's shape, puts such code above MaxLive).

Only general registers outside tuples, precolored, pinned, asynchronous and implicitly read
registers are split, and the function as written is left alone: :func:`split_at_block_ends`
returns a new function with register copies annotated as ``move`` edits (``//@move``), which
the allocation checker proves like any copy the allocator inserts. The caller colors it and
keeps it only when it uses fewer registers; a copy whose two ends get one register is dropped
when the allocation is written (``driver._drop_copies_in_place``), the others stay and are
counted (the report's ``block_split``).
"""

from __future__ import annotations

from ..analysis.liveness import instr_gen_kill
from ..ir import build
from ..ir.cfg import CFG, _TERMINATORS
from ..ir.edits import Edit, EditKind
from ..ir.instruction import DEF, USE, Instruction, Removed
from ..ir.module import Function
from ..ir.operands import Mem, Reg
from ..ir.registers import CLASS_BITS, RegClass
from ..records import record
from .api import Coloring, Problem
from .compact import clique_registers, compact, high_water


@record
class BlockSplit:
    """A split function: ``function`` (a copy), the copies inserted (``copies``: instruction
    id -> (block, the register it copies, its site: ``("end", block)`` or ``("at",
    id(instruction))``)), and ``origin``: each new register -> the register of the input it
    is a piece of."""

    function: Function
    copies: dict[int, tuple[int, int, tuple]]
    origin: dict[int, int]


#: The 32-bit classes: the values a copy inside a block moves out of a wide value's way
NARROW = frozenset(c for c in RegClass if c != RegClass.PRED and CLASS_BITS[c] == 32)


class _Names:
    """Union-find over the names of the pieces (hashable keys)."""

    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, k):
        parent = self.parent
        root = k
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[k] != root:
            parent[k], k = root, parent[k]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def splittable(fn: Function, excluded: set[int]) -> set[int]:
    """The registers that may be split: scalar general registers not in ``excluded`` (tuple
    members, precolored, pinned, asynchronous), never read implicitly nor named by a removed
    instruction."""
    regs = fn.regs
    out = {v for v in range(len(regs.names))
           if regs.classes[v] != RegClass.PRED and regs.vec[v] <= 1 and v not in excluded}
    for s in fn.body:
        if type(s) is Instruction:
            out.difference_update(s.implicit_uses)
        elif type(s) is Removed:
            out.difference_update(s.instr.defs)
            out.difference_update(s.instr.uses)
    return out


def _operand_regs(op) -> list[Reg]:
    return [op] if type(op) is Reg else list(op.regs())


def _new_segments(ins: Instruction, cand: set[int]) -> set[int]:
    """The registers of ``cand`` that ``ins`` redefines whole (a new segment starts)."""
    if ins.guard >= 0:
        return set()
    fresh = {d for d in ins.defs if d in cand}
    if not fresh:
        return fresh
    for op, role in zip(ins.ops, ins.roles):
        if type(op) is Mem or not role & DEF:
            continue
        for r in _operand_regs(op):
            if r.comp or role & USE:
                fresh.discard(r.v)          # a partial or read-modify-write definition
    return fresh


def split_at_block_ends(fn: Function, cfg: CFG, live_in: list[int], live_out: list[int],
                        cand: set[int], value_of,
                        whole: frozenset = frozenset(),
                        split_before: frozenset[int] = frozenset()) -> BlockSplit | None:
    """``fn`` with the registers of ``cand`` split into segments joined by copies at block
    ends (module docstring); ``cfg`` and the liveness (``live_in``/``live_out`` bitsets per
    block) are ``fn``'s; ``value_of(v)`` is the input's register whose value ``v`` carries
    (what a copy's ``//@move`` names). Before each instruction of ``split_before`` (ids), the
    32-bit registers of ``cand`` live across it are copied into new pieces too (a copy inside a
    block: where a wide value's aligned placement is fragmented by narrow ones). A copy site
    (``("end", block)`` or ``("at", id(instruction))``) and register pair of ``whole`` gets no
    copy. None when every register stays one piece (the graph would not change)."""
    mask = 0
    for v in cand:
        mask |= 1 << v
    names = _Names()
    # per block: (the key each occurrence maps to, per instruction), and the copies at its end
    occurrence: dict[int, tuple[dict[int, object], dict[int, object]]] = {}
    copies_at: dict[int, list[tuple[int, object, object]]] = {}    # block -> (v, out, last)
    copies_before: dict[int, list[tuple[int, object, object]]] = {}  # id(ins) -> (v, new, old)
    block_of_copies: dict[int, int] = {}                                # id(ins) -> block
    out_key: dict[tuple[int, int], object] = {}
    classes = fn.regs.classes
    for b in cfg.blocks:
        across: dict[int, int] = {}
        if split_before and any(id(ins) in split_before for ins in b.instrs):
            live = live_out[b.id] & mask
            for ins in reversed(b.instrs):
                if id(ins) in split_before:
                    touched = 0
                    for r in ins.defs + ins.uses:
                        touched |= 1 << r
                    across[id(ins)] = live & ~touched
                gen, kill = instr_gen_kill(ins)
                live = ((live & ~kill) | gen) & mask
        cur: dict[int, object] = {}
        lin = live_in[b.id] & mask
        while lin:
            low = lin & -lin
            v = low.bit_length() - 1
            cur[v] = ("in", b.id, v)
            lin ^= low
        redefined = set()
        term = b.instrs[-1] if b.instrs and b.instrs[-1].base in _TERMINATORS else None
        for ins in b.instrs:
            moves = []
            live_across = across.get(id(ins), 0)
            while live_across:
                low = live_across & -live_across
                v = low.bit_length() - 1
                live_across ^= low
                if classes[v] in NARROW and (("at", id(ins)), v) not in whole:
                    old = cur.setdefault(v, ("in", b.id, v))
                    cur[v] = ("at", id(ins), v)
                    moves.append((v, cur[v], old))
            if moves:
                copies_before[id(ins)] = moves
                block_of_copies[id(ins)] = b.id
            used = {u: cur.setdefault(u, ("in", b.id, u)) for u in ins.uses if u in cand}
            fresh = _new_segments(ins, cand)
            defined = {}
            for d in ins.defs:
                if d in cand:
                    if d in fresh:
                        cur[d] = ("def", id(ins), d)
                        redefined.add(d)
                    defined[d] = cur.setdefault(d, ("in", b.id, d))
            occurrence[id(ins)] = (used, defined)
        lout = live_out[b.id] & mask
        ends = []
        while lout:
            low = lout & -lout
            v = low.bit_length() - 1
            lout ^= low
            last = cur.setdefault(v, ("in", b.id, v))
            if v in redefined and (("end", b.id), v) not in whole and not (
                    term is not None and v in term.uses):
                ends.append((v, ("out", b.id, v), last))
                out_key[(b.id, v)] = ("out", b.id, v)
            else:
                out_key[(b.id, v)] = last
        if ends:
            copies_at[b.id] = ends
    for b in cfg.blocks:
        for s in b.succs:
            lin = live_in[s] & mask
            while lin:
                low = lin & -lin
                v = low.bit_length() - 1
                lin ^= low
                key = out_key.get((b.id, v))
                if key is not None:
                    names.union(key, ("in", s, v))
    out = fn.copy()
    regs = out.regs
    register_of: dict = {}
    origin: dict[int, int] = {}
    kept: set[int] = set()

    def register(key) -> int:
        root = names.find(key)
        r = register_of.get(root)
        if r is None:
            v = key[2]
            if v not in kept:
                r = v                       # the first piece keeps the register
                kept.add(v)
            else:
                r = regs.like(v, f"{regs.names[v]}$b")
                origin[r] = v
            register_of[root] = r
        return r

    def rewrite(ins: Instruction) -> Instruction:
        used, defined = occurrence[id(ins)]
        if not used and not defined:
            return ins
        new_ops = []
        for op, role in zip(ins.ops, ins.roles):
            # a definition's operand names the segment it writes, any other the one it reads
            keys = defined if type(op) is not Mem and role & DEF and not role & USE else used

            def name(r: Reg, keys=keys) -> Reg:
                key = keys.get(r.v)
                return Reg(register(key), r.comp) if key is not None else r
            new_ops.append(op.map_regs(name))
        return ins.copy_with(new_ops)

    inserted: dict[int, tuple[int, int, tuple]] = {}

    def copy(v: int, dst_key, src_key, line: int, block: int, site: tuple) -> list:
        dst, src = register(dst_key), register(src_key)
        if dst == src:
            return []
        mv = build.copy(regs, dst, src, line)
        mv.origin = Edit(EditKind.MOVE, value_of(v))
        inserted[id(mv)] = (block, v, site)
        return [mv]
    end_of: dict[int, tuple[int, bool]] = {}      # id(instruction) -> (block, copies before it)
    for b in cfg.blocks:
        if b.id in copies_at and b.instrs:
            last = b.instrs[-1]
            end_of[id(last)] = (b.id, last.base in _TERMINATORS)
    body = []
    for s in out.body:
        if type(s) is not Instruction:
            body.append(s)
            continue
        for v, new_key, old_key in copies_before.get(id(s), ()):
            body.extend(copy(v, new_key, old_key, s.line, block_of_copies[id(s)],
                             ("at", id(s))))
        new = rewrite(s)
        at = end_of.get(id(s))
        if at is None:
            body.append(new)
            continue
        moves = []
        for v, out_name, last in copies_at[at[0]]:
            moves.extend(copy(v, out_name, last, s.line, at[0], ("end", at[0])))
        body.extend(moves + [new] if at[1] else [new] + moves)
    if not origin:
        return None                     # every register is one piece: nothing changed
    out.body = body
    return BlockSplit(out, inserted, origin)


@record
class SplitColoring:
    """A split function colored with fewer registers: the split (:class:`BlockSplit`), its
    analysis, problem and coloring, and the copies left (ends in different registers)."""

    split: BlockSplit
    analysis: object
    problem: Problem
    coloring: Coloring
    copies_left: list[tuple[int, int]]      # (block, register) of each copy left


#: Copies left by the split that are each tried once merged back (no copy at that block end),
#: hottest block first: the split is recolored without it and kept so when the register count
#: holds (matrixMul: 4 copies left, 1 in the loop; see docs/decisions.md).
MERGE_TRIES = 8
#: The most copies a kept split may leave inside loops (each runs on every trip): one register
#: fewer is not worth more (Mandelbrot1_sm13<double>: 32 -> 31 registers for 18 to 22 copies
#: in its loops; docs/decisions.md). ``SplitToMaxLive=2`` lifts the limit.
LOOP_COPIES = 2
#: The largest function (instructions) whose 32-bit values are also split inside blocks
#: around the definitions of wide values (each such definition may add a copy per value
#: live across it, so the graph grows with the function's size times its pressure).
INSIDE_MAX_INSTRUCTIONS = 600


def recolor_split(work: Function, analysis, excluded: set[int], value_of, analyse,
                  problem_of, registers: int, bound: int,
                  loop_copies: int | None = LOOP_COPIES) -> SplitColoring | None:
    """The leaf function ``work`` (its final round's ``analysis``, colored with ``registers``
    general registers) split at block ends (:func:`split_at_block_ends`; ``excluded``
    registers stay whole) and colored by compaction (:func:`compact.compact`: the
    program-order greedy colorings, the squeaky wheel, the bounded search down to ``bound``,
    MaxLive), or None when that uses no fewer registers. Where that stays above ``bound``
    (in functions of at most ``INSIDE_MAX_INSTRUCTIONS``), the 32-bit registers live across
    each definition of a wide value (64 bits and up, or a tuple's member) are split there too,
    kept when it uses fewer registers still. Then each copy left with its ends in two
    registers is merged back in turn (at most ``MERGE_TRIES``, hottest first) where the count
    holds without it; a split that still leaves more than ``loop_copies`` copies inside loops
    is not kept (None: no limit). ``analyse(fn)`` and ``problem_of(analysis)`` build the split
    function's analysis and uncoalesced problem as the driver does for its own rounds."""
    cand = splittable(work, excluded)
    liveness = analysis.liveness
    blocks = analysis.cfg.blocks

    def colored(whole: frozenset, to_beat: int, before: frozenset) -> SplitColoring | None:
        split = split_at_block_ends(work, analysis.cfg, liveness.live_in, liveness.live_out,
                                    cand, value_of, whole, before)
        if split is None:
            return None
        new_analysis = analyse(split.function)
        if new_analysis.pressure.max_live > analysis.pressure.max_live:
            return None                 # (a copy raised the pressure: no gain possible)
        problem = problem_of(new_analysis)
        coloring = Coloring()
        if not compact(problem, coloring, bound, to_beat=(to_beat, None)):
            return None
        start = problem.register_starts(coloring.start)
        left = [split.copies[id(ins)] for ins in new_analysis.cfg.instrs
                if id(ins) in split.copies and start.get(ins.defs[0]) != start.get(ins.uses[0])]
        return SplitColoring(split, new_analysis, problem, coloring, left)

    before: frozenset = frozenset()
    best = colored(frozenset(), registers, before)
    found = registers if best is None else high_water(best.problem, best.coloring.start)
    if found > bound and len(analysis.cfg.instrs) <= INSIDE_MAX_INSTRUCTIONS:
        wide = _wide_definitions(analysis)
        if wide:
            inside = colored(frozenset(), found, wide)
            if inside is not None:
                best, before = inside, wide
                found = high_water(best.problem, best.coloring.start)
    if best is None:
        return None
    # a count is proven minimal for the function only by a clique (values live at one point:
    # no split lowers it); the search's proofs hold for the split graph alone
    best.coloring.optimal = found <= clique_registers(best.problem) or None
    whole: frozenset = frozenset()
    tried = sorted(best.copies_left, key=lambda c: -blocks[c[0]].freq)[:MERGE_TRIES]
    for block, v, site in tried:
        trial = colored(whole | {(site, v)}, found + 1, before)
        if trial is not None and len(trial.copies_left) < len(best.copies_left):
            trial.coloring.optimal = best.coloring.optimal
            whole, best = whole | {(site, v)}, trial
    if loop_copies is not None and sum(1 for b, _, _ in best.copies_left
                                       if blocks[b].depth > 0) > loop_copies:
        return None
    return best


def _wide_definitions(analysis) -> frozenset[int]:
    """Ids of the instructions defining a value wider than 32 bits or a tuple's member: where
    narrow values live across may fragment the aligned placement it needs."""
    regs = analysis.fn.regs
    grouped = analysis.tuples.group_of
    out = set()
    for ins in analysis.cfg.instrs:
        for d in ins.defs:
            c = regs.classes[d]
            if c != RegClass.PRED and (CLASS_BITS[c] > 32 or regs.vec[d] > 1 or d in grouped):
                out.add(id(ins))
                break
    return frozenset(out)
