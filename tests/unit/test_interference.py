"""The interference graph (issue 3, SPEC 4.2): a definition interferes with what is live after
it (also when it is dead), copies do not interfere with their source and are recorded as moves,
registers defined together interfere, predicates and general registers never interfere, values
live on entry interfere with each other; bank-conflict edges are kept apart."""

from __future__ import annotations

import itertools

import pytest

from conftest import DATA
from ptxalloc.analysis.interference import InterferenceGraph
from ptxalloc.analysis.liveness import Liveness
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.registers import RegClass
from ptxalloc.ptx import parse, parse_file
from ptxalloc.util import bits

HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"


def kernel(body: str, decls: str = "") -> str:
    return (HDR + ".visible .entry k(.param .u64 k_out, .param .u32 k_n)\n{\n"
            "\t.reg .pred %p<8>;\n\t.reg .b32 %r<20>;\n\t.reg .b64 %rd<8>;\n"
            "\t.reg .f32 %f<8>;\n\t.reg .b16 %rs<8>;\n" + decls
            + "\tld.param.u32 %r1, [k_n];\n\tld.param.u64 %rd1, [k_out];\n" + body + "}\n")


class Graph:
    def __init__(self, fn):
        self.fn = fn
        self.cfg = CFG(fn)
        self.lv = Liveness(self.cfg)
        self.g = InterferenceGraph(self.cfg, self.lv)

    def v(self, name: str, nth: int = 0) -> int:
        ids = [i for i, n in enumerate(self.fn.regs.names) if n == name]
        return ids[nth]

    def adj(self, name: str) -> set[str]:
        return {self.fn.regs.names[u] for u in bits(self.g.adj[self.v(name)])}

    def edge(self, a: str, b: str) -> bool:
        x, y = self.v(a), self.v(b)
        assert self.g.interferes(x, y) == self.g.interferes(y, x)
        return self.g.interferes(x, y)


def of_text(body: str, decls: str = "") -> Graph:
    return Graph(parse(kernel(body, decls), "k.ptx").functions[0])


def of_file(path, name=None) -> Graph:
    m = parse_file(str(path))
    return Graph(m.function(name) if name else m.functions[0])


def check_symmetric_irreflexive(g: InterferenceGraph) -> None:
    for u in range(g.nregs):
        assert not g.adj[u] >> u & 1, u
        for w in bits(g.adj[u]):
            assert g.adj[w] >> u & 1, (u, w)
        for w in bits(g.bank_adj[u]):
            assert g.bank_adj[w] >> u & 1, (u, w)
            assert w != u


# --- hand-checked graphs ----------------------------------------------------------------------


def test_straight_line_by_hand():
    G = of_text("\tadd.s32 %r2, %r1, 1;\n"       # r1, rd1 live after
                "\tmul.lo.s32 %r3, %r2, %r1;\n"  # r1 dies here
                "\tadd.s32 %r4, %r3, %r2;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    check_symmetric_irreflexive(G.g)
    assert G.adj("%r1") == {"%rd1", "%r2"}
    assert G.adj("%r2") == {"%rd1", "%r1", "%r3"}
    assert G.adj("%r3") == {"%rd1", "%r2"}
    assert G.adj("%r4") == {"%rd1"}
    assert G.adj("%rd1") == {"%r1", "%r2", "%r3", "%r4"}
    st = G.g.statistics()
    assert (st.nodes, st.edges, st.max_degree, st.moves) == (5, 6, 4, 0)
    assert st.density == pytest.approx(6 / 10)
    assert st.avg_degree == pytest.approx(12 / 5)
    assert st.as_dict() == {"nodes": 5, "edges": 6, "density": 0.6, "max_degree": 4,
                            "avg_degree": 2.4, "moves": 0}


def test_diamond_arms_do_not_interfere():
    G = of_file(DATA / "hand" / "diamond.ptx")
    check_symmetric_irreflexive(G.g)
    assert not G.edge("%r4", "%r5")
    assert not G.edge("%r4", "%r3") and not G.edge("%r5", "%r3")
    assert G.edge("%r1", "%r3") and G.edge("%r1", "%r4") and G.edge("%r1", "%r5")
    assert G.adj("%p1") == set()


def test_value_around_back_edge_interferes_with_loop_temporaries():
    G = of_file(DATA / "hand" / "loop_backedge.ptx")
    for carried in ("%r1", "%r2", "%r3", "%r4", "%rd1"):
        assert G.edge(carried, "%r5")
    assert not G.edge("%r5", "%rd2")
    assert G.adj("%rd2") == {"%r2"}


def test_copy_does_not_interfere_and_is_a_move():
    G = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tmov.u32 %r3, %r2;\n"          # copy; %r2 stays live
                "\tadd.s32 %r4, %r2, %r3;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    assert not G.edge("%r3", "%r2")
    copy_id = next(i for i, ins in enumerate(G.cfg.instrs) if ins.opcode == "mov.u32")
    assert G.g.moves == [(copy_id, G.v("%r3"), G.v("%r2"))]
    assert G.cfg.instrs[copy_id].is_copy
    assert G.g.statistics().moves == 1
    # a copy still interferes with everything else live after it
    assert G.edge("%r3", "%rd1")


def test_copy_interferes_when_the_source_is_redefined_while_the_copy_lives():
    G = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tmov.u32 %r3, %r2;\n"
                "\tadd.s32 %r2, %r2, 1;\n"       # %r2 changes while %r3 is live
                "\tadd.s32 %r4, %r2, %r3;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    assert G.edge("%r3", "%r2")
    assert len(G.g.moves) == 1


def test_guarded_mov_is_not_a_copy():
    G = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tmov.u32 %r3, 0;\n"
                "\tsetp.eq.u32 %p1, %r1, 0;\n"
                "\t@%p1 mov.u32 %r3, %r2;\n"
                "\tadd.s32 %r4, %r2, %r3;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    guarded = next(i for i in G.cfg.instrs if i.guard >= 0)
    assert not guarded.is_copy
    assert G.g.moves == []
    assert G.edge("%r3", "%r2")


def test_conversion_is_not_a_copy():
    G = of_text("\tmov.u16 %rs1, 1;\n"
                "\tcvt.u32.u16 %r3, %rs1;\n"
                "\tadd.s32 %r4, %r3, 1;\n"
                "\tst.global.u16 [%rd1], %rs1;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    assert G.g.moves == []
    assert G.edge("%r3", "%rs1")


def test_mov_between_32_bit_types_is_a_copy():
    G = of_text("\tmov.f32 %f1, 0f3F800000;\n"
                "\tmov.b32 %r3, %f1;\n"
                "\tst.global.f32 [%rd1], %f1;\n"
                "\tst.global.u32 [%rd1], %r3;\n"
                "\tret;\n")
    movb = next(i for i in G.cfg.instrs if i.opcode == "mov.b32")
    assert movb.is_copy
    assert not G.edge("%r3", "%f1")
    assert G.g.moves == [(G.cfg.instrs.index(movb), G.v("%r3"), G.v("%f1"))]


def test_mov_between_classes_is_not_a_copy():
    G = of_text("\tmov.b32 %r3, {%rs1, %rs2};\n"
                "\tst.global.u16 [%rd1], %rs1;\n"
                "\tst.global.u32 [%rd1], %r3;\n"
                "\tret;\n")
    assert G.g.moves == []
    assert G.edge("%r3", "%rs1")


def test_copy_between_64_bit_registers_is_a_move():
    G = of_text("\tmov.u64 %rd2, %rd1;\n\tst.global.u32 [%rd2], %r1;\n"
                "\tst.global.u32 [%rd1], %r1;\n\tret;\n")
    assert not G.edge("%rd2", "%rd1")
    assert [(d, s) for _, d, s in G.g.moves] == [(G.v("%rd2"), G.v("%rd1"))]


def test_dead_definition_interferes_at_its_definition():
    G = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tadd.s32 %r9, %r1, 2;\n"       # never used
                "\tadd.s32 %r3, %r2, %r1;\n"
                "\tst.global.u32 [%rd1], %r3;\n"
                "\tret;\n")
    assert G.adj("%r9") == {"%rd1", "%r1", "%r2"}
    assert not G.edge("%r9", "%r3")


def test_setp_pair_interferes_even_when_one_is_dead():
    G = of_text("\tsetp.lt.s32 %p1|%p2, %r1, 5;\n"
                "\t@%p1 st.global.u32 [%rd1], %r1;\n"
                "\tret;\n")
    assert G.edge("%p1", "%p2")
    assert G.adj("%p2") == {"%p1"}


def test_setp_pair_file():
    G = of_file(DATA / "hand" / "setp_pair.ptx")
    check_symmetric_irreflexive(G.g)
    assert G.edge("%p1", "%p2")
    assert not G.edge("%p3", "%p1") and not G.edge("%p3", "%p2")
    assert G.edge("%r4", "%r3")                     # shfl's d|p while the source lives


def test_predicates_never_interfere_with_general_registers():
    for path in [DATA / "hand" / "many_preds.ptx", DATA / "pressure_sm80.ptx",
                 DATA / "hand" / "setp_pair.ptx"]:
        for fn in parse_file(str(path)).functions:
            G = Graph(fn)
            classes = fn.regs.classes
            preds = sum(1 << v for v, c in enumerate(classes) if c == RegClass.PRED)
            assert G.g.pred_mask == preds
            for v, c in enumerate(classes):
                if c == RegClass.PRED:
                    assert G.g.adj[v] & ~preds == 0
                else:
                    assert G.g.adj[v] & preds == 0


def test_many_preds_clique():
    G = of_file(DATA / "hand" / "many_preds.ptx")
    p = [f"%p{i}" for i in range(1, 14)]
    for a, b in itertools.combinations(p, 2):
        assert G.edge(a, b), (a, b)


def test_guarded_definition_interferes_with_the_value_it_may_keep():
    G = of_file(DATA / "hand" / "guarded_def.ptx")
    check_symmetric_irreflexive(G.g)
    # %r4 is live from the entry (defined only under a guard): it meets everything live there
    # and everything defined while it lives
    assert G.adj("%r4") >= {"%rd1", "%r1", "%rd2", "%r2"}
    # %r2 stays live across its guarded redefinitions: it interferes with %r1 and %rd2
    assert G.edge("%r2", "%r1") and G.edge("%r2", "%rd2")


def test_values_live_on_entry_interfere_with_each_other():
    G = of_file(DATA / "hand" / "undef_use.ptx")
    assert G.edge("%r3", "%r5")
    G2 = of_text("\tadd.s32 %r2, %r10, %r11;\n\tst.global.u32 [%rd1], %r2;\n\tret;\n")
    assert G2.edge("%r10", "%r11")
    assert G2.edge("%r10", "%r1")                # the load of %r1 happens while both live


def test_shadowed_registers_are_distinct_nodes_that_interfere():
    G = of_file(DATA / "hand" / "scopes.ptx")
    outer, inner = G.v("%r1", 0), G.v("%r1", 1)
    assert outer != inner
    assert G.g.interferes(outer, inner)
    t_a, t_b = G.v("%t", 0), G.v("%t", 1)
    assert G.fn.regs.classes[t_a] == RegClass.GPR32        # scope A's %t (.b32) comes first
    assert G.fn.regs.classes[t_b] == RegClass.GPR64        # scope B's %t (.b64)
    assert G.g.interferes(t_a, t_b)                         # A's %t is live across scope B


def test_bank_conflict_edges_are_soft_and_separate():
    G = of_text("\tadd.s32 %r2, %r1, 3;\n"
                "\tmad.lo.s32 %r3, %r1, %r2, %r1;\n"
                "\tsetp.eq.u32 %p1, %r3, 0;\n"
                "\tselp.b32 %r4, %r3, %r2, %p1;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    check_symmetric_irreflexive(G.g)
    r1, r2, r3 = G.v("%r1"), G.v("%r2"), G.v("%r3")
    assert G.g.bank_adj[r1] >> r2 & 1 and G.g.bank_adj[r2] >> r1 & 1
    assert G.g.bank_adj[r3] >> r2 & 1          # selp's two sources
    # predicates and single-source instructions make no bank edges
    assert all(G.g.bank_adj[v] == 0 for v in range(G.g.nregs)
               if G.fn.regs.classes[v] == RegClass.PRED)
    # %r1 and %r3 are never read by one instruction: no bank edge
    assert not G.g.bank_adj[r1] >> r3 & 1


def test_bank_edge_is_no_interference_edge():
    """A copy and its source read together: a bank edge, but no interference."""
    G = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tmov.u32 %r3, %r2;\n"
                "\tadd.s32 %r4, %r2, %r3;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    r2, r3 = G.v("%r2"), G.v("%r3")
    assert G.g.bank_adj[r2] >> r3 & 1
    assert not G.g.interferes(r2, r3)


@pytest.mark.parametrize("path", sorted(DATA.glob("**/*.ptx")), ids=lambda p: p.name)
def test_symmetric_irreflexive_on_every_data_function(path):
    for fn in parse_file(str(path)).functions:
        G = Graph(fn)
        check_symmetric_irreflexive(G.g)
        st = G.g.statistics()
        assert st.nodes == len(fn.regs)
        assert st.edges == sum(a.bit_count() for a in G.g.adj) // 2
        assert 0.0 <= st.density <= 1.0


@pytest.mark.parametrize("path", sorted(DATA.glob("**/*.ptx")), ids=lambda p: p.name)
def test_every_definition_interferes_with_what_is_live_after_it(path):
    """The defining rule, checked instruction by instruction on real code: each register an
    instruction defines interferes with every same-file register live after it, except a
    copy's source."""
    for fn in parse_file(str(path)).functions:
        G = Graph(fn)
        classes = fn.regs.classes
        for b in G.cfg.blocks:
            after = G.lv.live_after(b.id)
            for ins, live in zip(b.instrs, after):
                for d in ins.defs:
                    want = live & ~(1 << d)
                    if ins.is_copy:
                        want &= ~(1 << ins.uses[0])
                    same = G.g.pred_mask if classes[d] == RegClass.PRED else G.g.gpr_mask
                    want &= same
                    assert G.g.adj[d] & want == want, (fn.name, ins)


@pytest.mark.parametrize("name", ["wgmma/wgmma_two_accumulators_sm90a.ptx",
                                  "wgmma/wgmma_serialize_sm90a.ptx",
                                  "wgmma/wgmma_scores_in_place_sm90a.ptx",
                                  "triton/attn_fwd_tma_64x64_d64.ptx",
                                  "wgmma/wgmma_fence_label_sm90a.ptx",
                                  "wgmma/wgmma_fence_back_edge_sm90a.ptx",
                                  "wgmma/wgmma_fence_skipped_sm90a.ptx"])
def test_wgmma_fence_edges_are_the_references(name):
    """The edges between a ``wgmma.mma_async``'s registers and the general registers defined
    where a path with no ``wgmma.fence`` leads to it (across labels: the label file; round a
    loop's back edge and past a skipped fence: the last two), added once per run of
    instructions under the same wgmmas (issue 16: not once per definition), are those of the
    reference built edge by edge from a search of the paths (tests/interference_reference.py)."""
    from conftest import DATA
    from interference_reference import expected_adjacency
    from ptxalloc.analysis import analyze_function
    from ptxalloc.ptx import parse_file
    from ptxalloc.target.sm import profile_for

    module = parse_file(str(DATA / name))
    for fn in module.functions:
        a = analyze_function(fn, profile_for(None, module.sm))
        assert any(ins.opcode.startswith("wgmma.mma_async") for ins in a.cfg.instrs)
        assert a.graph.adj == expected_adjacency(fn, a.cfg, a.liveness, a.graph.pred_mask,
                                                 a.graph.gpr_mask)
