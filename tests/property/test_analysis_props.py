"""Property tests of the analyses (issue 3), on random programs written as PTX text and parsed.

(a) Liveness equals its definition, computed by brute force: a register is live at a point iff
    some path from that point reaches a use of it before an unguarded definition. The oracle
    works on the instruction-level graph built from the generator's own model of the program
    (not from the CFG under test).
(b) On straight-line SSA code of 32-bit registers without copies, MaxLive equals the largest
    clique of the interference graph (interval graphs are perfect); on any straight-line code
    without copies or guards, every live set is a clique, so the largest clique is at least
    MaxLive.
(c) The interference graph is symmetric and irreflexive, and every definition interferes with
    what is live after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from interference_reference import expected_adjacency
from ptxalloc.analysis.interference import InterferenceGraph
from ptxalloc.analysis.liveness import Liveness
from ptxalloc.analysis.pressure import Pressure
from ptxalloc.analysis.tuples import find_tuples
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.registers import RegClass
from ptxalloc.ptx import parse
from ptxalloc.util import bits

HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"
GPRS = ["%r1", "%r2", "%r3", "%r4"]
PREDS = ["%p1", "%p2"]


@dataclass
class Ins:
    text: str
    uses: set[str]
    defs: set[str]                 # what it writes
    kill: set[str]                 # what it definitely writes (not under a guard)
    term: str = ""                 # "", "bra", "ret"
    guarded: bool = False
    target: int = -1               # block index of a branch


@dataclass
class Program:
    blocks: list[list[Ins]] = field(default_factory=list)

    def flat(self) -> list[Ins]:
        return [ins for b in self.blocks for ins in b]

    def text(self) -> str:
        lines = [HDR, ".visible .entry k()\n{\n", "\t.reg .pred %p<3>;\n", "\t.reg .b32 %r<5>;\n"]
        for i, b in enumerate(self.blocks):
            lines.append(f"$B{i}:\n")
            for ins in b:
                lines.append("\t" + ins.text + "\n")
        lines.append("}\n")
        return "".join(lines)

    def succs(self) -> list[list[int]]:
        """Instruction-level successors, from the program model."""
        firsts = []
        n = 0
        for b in self.blocks:
            firsts.append(n)
            n += len(b)
        out = []
        for i, ins in enumerate(self.flat()):
            nxt = [i + 1] if i + 1 < n else []
            if ins.term == "bra":
                out.append([firsts[ins.target]] + (nxt if ins.guarded else []))
            elif ins.term == "ret":
                out.append(nxt if ins.guarded else [])
            else:
                out.append(nxt)
        return out


def _guard(draw) -> tuple[str, str]:
    p = draw(st.sampled_from(PREDS))
    neg = draw(st.booleans())
    return ("@!" if neg else "@") + p, p


@st.composite
def instruction(draw) -> Ins:
    kind = draw(st.sampled_from(["mov", "add", "add", "copy", "gmov", "gadd", "setp", "st",
                                 "setp2"]))
    d = draw(st.sampled_from(GPRS))
    a = draw(st.sampled_from(GPRS))
    b = draw(st.sampled_from(GPRS))
    if kind == "mov":
        return Ins(f"mov.u32 {d}, {draw(st.integers(0, 9))};", set(), {d}, {d})
    if kind == "add":
        return Ins(f"add.s32 {d}, {a}, {b};", {a, b}, {d}, {d})
    if kind == "copy":
        return Ins(f"mov.u32 {d}, {a};", {a}, {d}, {d})
    if kind == "gmov":
        g, p = _guard(draw)
        return Ins(f"{g} mov.u32 {d}, {a};", {p, a}, {d}, set())
    if kind == "gadd":
        g, p = _guard(draw)
        return Ins(f"{g} add.s32 {d}, {d}, {a};", {p, d, a}, {d}, set())
    if kind == "setp":
        p = draw(st.sampled_from(PREDS))
        return Ins(f"setp.lt.s32 {p}, {a}, {b};", {a, b}, {p}, {p})
    if kind == "setp2":
        return Ins(f"setp.lt.s32 %p1|%p2, {a}, 5;", {a}, {"%p1", "%p2"}, {"%p1", "%p2"})
    return Ins(f"st.shared.u32 [{a}], {b};", {a, b}, set(), set())


@st.composite
def terminator(draw, nblocks: int) -> Ins | None:
    kind = draw(st.sampled_from(["none", "none", "bra", "gbra", "gbra", "ret", "gret", "exit"]))
    if kind == "none":
        return None
    if kind in ("bra", "gbra"):
        j = draw(st.integers(0, nblocks - 1))
        if kind == "bra":
            return Ins(f"bra.uni $B{j};", set(), set(), set(), "bra", False, j)
        g, p = _guard(draw)
        return Ins(f"{g} bra $B{j};", {p}, set(), set(), "bra", True, j)
    if kind == "gret":
        g, p = _guard(draw)
        return Ins(f"{g} ret;", {p}, set(), set(), "ret", True)
    return Ins(f"{kind};", set(), set(), set(), "ret")


@st.composite
def programs(draw) -> Program:
    n = draw(st.integers(1, 6))
    prog = Program()
    for _ in range(n):
        body = draw(st.lists(instruction(), min_size=1, max_size=4))
        t = draw(terminator(n))
        prog.blocks.append(body + ([t] if t is not None else []))
    return prog


def brute_live_before(prog: Program) -> list[set[str]]:
    instrs = prog.flat()
    succ = prog.succs()
    regs = set(GPRS + PREDS)
    out = []
    for i in range(len(instrs)):
        live = set()
        for v in regs:
            seen = set()
            stack = [i]
            while stack:
                j = stack.pop()
                if j in seen:
                    continue
                seen.add(j)
                if v in instrs[j].uses:
                    live.add(v)
                    break
                if v in instrs[j].kill:
                    continue
                stack.extend(succ[j])
        out.append(live)
    return out


def names(fn, bitset: int) -> set[str]:
    return {fn.regs.names[v] for v in bits(bitset)}


@settings(max_examples=60, deadline=None)
@given(prog=programs())
def test_liveness_matches_brute_force(prog):
    fn = parse(prog.text(), "random.ptx").functions[0]
    cfg = CFG(fn)
    model = prog.flat()
    assert [ins.opcode for ins in cfg.instrs] == [m.text.split()[1 if m.text[0] == "@" else 0]
                                                  .rstrip(";") for m in model]
    lv = Liveness(cfg)
    before = brute_live_before(prog)
    succ = prog.succs()
    after = [set().union(*(before[s] for s in succ[i])) if succ[i] else set()
             for i in range(len(model))]
    for b in cfg.blocks:
        assert b.instrs, "every generated block has an instruction"
        first, last = b.first, b.first + len(b.instrs) - 1
        assert names(fn, lv.live_in[b.id]) == before[first], (b.id, prog.text())
        assert names(fn, lv.live_out[b.id]) == after[last], (b.id, prog.text())
        for k, (la, lb) in enumerate(zip(lv.live_after(b.id), lv.live_before(b.id))):
            assert names(fn, lb) == before[first + k]
            assert names(fn, la) == after[first + k]
    assert names(fn, lv.entry_live) == before[0]


def check_graph(fn, cfg, lv, g) -> None:
    """``g`` is exactly the graph of SPEC 4.2 (no edge missing, none extra), symmetric,
    irreflexive, with general registers and predicates apart."""
    classes = fn.regs.classes
    for u in range(g.nregs):
        assert not g.adj[u] >> u & 1
        for w in bits(g.adj[u]):
            assert g.adj[w] >> u & 1
            assert (classes[u] == RegClass.PRED) == (classes[w] == RegClass.PRED)
    assert g.adj == expected_adjacency(fn, cfg, lv, g.pred_mask, g.gpr_mask)


@settings(max_examples=60, deadline=None)
@given(prog=programs())
def test_interference_graph_symmetric_irreflexive(prog):
    fn = parse(prog.text(), "random.ptx").functions[0]
    cfg = CFG(fn)
    lv = Liveness(cfg)
    g = InterferenceGraph(cfg, lv)
    check_graph(fn, cfg, lv, g)
    st_ = g.statistics()
    assert st_.edges == sum(a.bit_count() for a in g.adj) // 2
    assert st_.moves == sum(1 for ins in cfg.instrs if ins.is_copy)


@settings(max_examples=60, deadline=None)
@given(prog=programs(), pick=st.integers(min_value=0))
def test_live_lengths_count_the_instructions_each_value_is_live_at(prog, pick):
    """``analyze``'s live length of a value, counted per live segment, is the number of
    instructions it is live after or defined by, counted instruction by instruction."""
    from ptxalloc.analysis.explain_peak import live_lengths

    fn = parse(prog.text(), "random.ptx").functions[0]
    cfg = CFG(fn)
    lv = Liveness(cfg)
    want = pick & ((1 << len(fn.regs)) - 1)
    expected = dict.fromkeys(bits(want), 0)
    for b in cfg.blocks:
        for ins, after in zip(b.instrs, lv.live_after(b.id)):
            here = after
            for d in ins.defs:
                here |= 1 << d
            for v in bits(here & want):
                expected[v] += 1
    assert live_lengths(cfg, lv, want) == expected


@settings(max_examples=60, deadline=None)
@given(prog=programs(), target=st.integers(min_value=0, max_value=4))
def test_change_scope_rows_are_the_live_sets_above_the_target(prog, target):
    """``what to change``'s rows, found per live segment, hold each value at exactly the
    instructions above the target whose live-after set or definitions hold it, and the
    excess classes partition those instructions by their excess."""
    from ptxalloc.analysis.explain_peak import change_scope

    fn = parse(prog.text(), "random.ptx").functions[0]
    cfg = CFG(fn)
    lv = Liveness(cfg)
    p = Pressure(cfg, lv, find_tuples(fn, cfg.instrs))

    class _A:                       # the analysis fields change_scope reads
        pressure, liveness = p, lv
    _A.cfg = cfg

    class _SM:                      # a target whose next occupancy step is ``target``
        pass
    import ptxalloc.analysis.explain_peak as ep
    real = ep.next_step
    ep.next_step = lambda *a, **k: target
    try:
        scope = change_scope(_A, _SM, 128)
    finally:
        ep.next_step = real
    limit = 2 * target
    expected_rows: dict[int, int] = {}
    expected_excess: dict[int, int] = {}
    for b in cfg.blocks:
        for k, (ins, after) in enumerate(zip(b.instrs, lv.live_after(b.id))):
            i = b.first + k
            e = int(round(2 * p.gpr[i])) - limit
            if e <= 0:
                continue
            expected_excess[e] = expected_excess.get(e, 0) | 1 << i
            here = after
            for d in ins.defs:
                here |= 1 << d
            for v in bits(here):
                expected_rows[v] = expected_rows.get(v, 0) | 1 << i
    assert scope.rows == expected_rows
    assert scope.by_excess == expected_excess


def _eager_picks(a, target: int, remat, remat_costs, costs, max_picks: int = 32) -> list:
    """"What to change"'s picks as its definition reads: per instruction above the target its
    excess and live set, and at every step the value freeing the most registers per unit of
    cost (ties to the lowest register id), gains recomputed from scratch."""
    p = a.pressure
    cfg = a.cfg
    limit = 2 * target
    excess: list[int] = []
    masks: list[int] = []
    for b in cfg.blocks:
        for k, after in enumerate(a.liveness.live_after(b.id)):
            units = int(round(2 * p.gpr[b.first + k]))
            if units > limit:
                for d in b.instrs[k].defs:
                    after |= 1 << d
                excess.append(units - limit)
                masks.append(after)
    costs_of = {}
    for v in sorted({v for m in masks for v in bits(m)}):
        cost = remat_costs[v] if v in remat else costs[v]
        if a.fn.regs.classes[v] != RegClass.PRED and p.units[v] and cost != float("inf"):
            costs_of[v] = cost
    picks = []
    while len(picks) < max_picks and any(e > 0 for e in excess):
        best = None
        for v, cost in costs_of.items():
            w = p.units[v]
            gain = sum(min(w, e) for e, m in zip(excess, masks) if e > 0 and m >> v & 1)
            if gain and (best is None or (-gain / max(cost, 1e-6), v) < best[0]):
                best = ((-gain / max(cost, 1e-6), v), v)
        if best is None:
            break
        v = best[1]
        excess = [e - p.units[v] if e > 0 and m >> v & 1 else e
                  for e, m in zip(excess, masks)]
        picks.append((a.fn.regs.names[v], round(costs_of.pop(v), 3)))
    return picks


@settings(max_examples=60, deadline=None)
@given(prog=programs(), target=st.integers(min_value=1, max_value=4))
def test_what_to_change_picks_as_the_eager_greedy_does(prog, target):
    """The lazy greedy over excess classes picks the values the eager greedy over every
    instruction's live set picks, in the same order, and says "enough" when it is."""
    import ptxalloc.analysis.explain_peak as ep
    from ptxalloc.analysis import analyze_function
    from ptxalloc.target.sm import profile_for

    fn = parse(prog.text(), "random.ptx").functions[0]
    sm = profile_for("sm_80")
    a = analyze_function(fn, sm)
    real = ep.next_step
    ep.next_step = lambda *args, **kw: target
    try:
        shared = ep.remat_and_costs(a)
        out = ep.what_to_change(a, sm, 128, "test", shared=shared)
    finally:
        ep.next_step = real
    remat, remat_costs, costs = shared
    got = [(c["name"], c["cost"]) for c in out["candidates"]]
    assert got == _eager_picks(a, target, remat, remat_costs, costs)


@settings(max_examples=80, deadline=None)
@given(prog=programs())
def test_pressure_counts_each_live_set_and_peaks_where_a_forward_walk_first_meets_it(prog):
    """The pressure walk (flags carried from block to block, last block first) counts at every
    instruction the 32-bit registers live after it or defined by it (a copy whose source stays
    live counting once), at every block entry its live-in set, and its peak is the first
    highest point of a walk of the blocks first to last, each from its last instruction to
    its entry."""
    fn = parse(prog.text(), "random.ptx").functions[0]
    cfg = CFG(fn)
    lv = Liveness(cfg)
    p = Pressure(cfg, lv, find_tuples(fn, cfg.instrs))
    classes = fn.regs.classes

    def units(live: int) -> int:
        return sum(p.units[v] for v in bits(live) if classes[v] != RegClass.PRED)

    order = []
    for b in cfg.blocks:
        for k in range(len(b.instrs) - 1, -1, -1):
            ins = b.instrs[k]
            after = lv.live_after(b.id)[k]
            here = after
            for d in ins.defs:
                here |= 1 << d
            if ins.is_copy and ins.uses[0] != ins.defs[0] and after >> ins.uses[0] & 1:
                here &= ~(1 << ins.defs[0])         # d shares s's register
            assert 2 * p.gpr[b.first + k] == units(here)
            order.append((units(here), b.first + k, b.id))
        assert 2 * p.entry_gpr[b.id] == units(lv.live_in[b.id])
        order.append((units(lv.live_in[b.id]), -1, b.id))
    top = max(u for u, _, _ in order)
    first = next((i, bid) for u, i, bid in order if u == top)
    assert (p.peak.instr, p.peak.block) == first


@settings(max_examples=60, deadline=None)
@given(prog=programs(), pick=st.integers(min_value=0))
def test_cost_terms_for_some_registers_equal_those_for_all(prog, pick):
    """The spill-cost terms found for a bitset of registers only are, for those registers,
    bit for bit the terms found for every register."""
    from ptxalloc.analysis.costs import cost_terms

    fn = parse(prog.text(), "random.ptx").functions[0]
    cfg = CFG(fn)
    lv = Liveness(cfg)
    want = pick & ((1 << len(fn.regs)) - 1)
    full = cost_terms(cfg, lv)
    some = cost_terms(cfg, lv, want)
    for v in bits(want):
        assert [t[v] for t in some] == [t[v] for t in full]


# --- (b) MaxLive and cliques on straight-line code ---------------------------------------------


def max_clique(adj: dict[int, int]) -> int:
    """Size of the largest clique (Bron-Kerbosch with pivoting) over int-bitset adjacency."""
    best = 0

    def expand(size: int, p: int, x: int) -> None:
        nonlocal best
        if not p and not x:
            best = max(best, size)
            return
        if size + p.bit_count() <= best:
            return
        pivot = max(bits(p | x), key=lambda u: (p & adj[u]).bit_count())
        for v in bits(p & ~adj[pivot]):
            expand(size + 1, p & adj[v], x & adj[v])
            p &= ~(1 << v)
            x |= 1 << v

    expand(0, sum(1 << v for v in adj), 0)
    return best


@st.composite
def straight_line(draw, ssa: bool) -> str:
    """Straight-line code over 32-bit registers: no copies, no guards. In SSA form each %v is
    defined at most once; %u0..%u2 are never defined (live on entry when read)."""
    n = draw(st.integers(1, 14))
    defined: list[str] = []
    pool = [f"%v{i}" for i in range(6)]
    lines = []

    def src() -> str:
        choices = defined + ["%u0", "%u1", "%u2"]
        return draw(st.sampled_from(choices))

    for k in range(n):
        kind = draw(st.sampled_from(["add", "add", "ld", "mov", "st", "mad"]))
        if kind == "st":
            lines.append(f"st.shared.u32 [{src()}], {src()};")
            continue
        d = f"%v{k}" if ssa else draw(st.sampled_from(pool))
        if kind == "add":
            lines.append(f"add.s32 {d}, {src()}, {draw(st.sampled_from([src(), '3']))};")
        elif kind == "mad":
            lines.append(f"mad.lo.s32 {d}, {src()}, {src()}, {src()};")
        elif kind == "ld":
            lines.append(f"ld.shared.u32 {d}, [{src()}+4];")
        else:
            lines.append(f"mov.u32 {d}, {draw(st.integers(0, 99))};")
        if d not in defined:
            defined.append(d)
    # keep a few values live to the end
    for v in draw(st.lists(st.sampled_from(defined or ["%u0"]), max_size=3)):
        lines.append(f"st.shared.u32 [%u0], {v};")
    decl = "\t.reg .b32 %v<16>;\n\t.reg .b32 %u<3>;\n"
    return (HDR + ".visible .entry k()\n{\n" + decl + "".join(f"\t{ln}\n" for ln in lines)
            + "\tret;\n}\n")


def _analyse(text: str):
    fn = parse(text, "line.ptx").functions[0]
    cfg = CFG(fn)
    lv = Liveness(cfg)
    g = InterferenceGraph(cfg, lv)
    p = Pressure(cfg, lv, find_tuples(fn, cfg.instrs))
    assert len(cfg.blocks) == 1 and not any(ins.is_copy for ins in cfg.instrs)
    assert all(c == RegClass.GPR32 for c in fn.regs.classes)
    return fn, cfg, lv, g, p


@settings(max_examples=60, deadline=None)
@given(text=straight_line(ssa=True))
def test_max_live_is_the_largest_clique_on_ssa_straight_line_code(text):
    fn, cfg, lv, g, p = _analyse(text)
    check_graph(fn, cfg, lv, g)
    clique = max_clique({v: g.adj[v] for v in range(g.nregs)})
    assert p.max_live == clique, text
    assert p.max_regs == clique
    assert p.max_preds == 0


@settings(max_examples=60, deadline=None)
@given(text=straight_line(ssa=False))
def test_every_live_set_is_a_clique(text):
    fn, cfg, lv, g, p = _analyse(text)
    check_graph(fn, cfg, lv, g)
    b = cfg.blocks[0]
    points = [lv.live_in[0]]
    for ins, live in zip(b.instrs, lv.live_after(0)):
        s = live
        for d in ins.defs:
            s |= 1 << d
        points.append(s)
    for s in points:
        for v in bits(s):
            assert g.adj[v] & s == s & ~(1 << v), text
    clique = max_clique({v: g.adj[v] for v in range(g.nregs)})
    assert clique >= p.max_live == max(s.bit_count() for s in points)


@given(st.sets(st.integers(min_value=0, max_value=4000), max_size=300))
def test_bits_lists_exactly_the_set_bits_in_order(positions):
    from ptxalloc.util import mask_of
    assert bits(mask_of(positions)) == sorted(positions)
