"""The control-flow graph (issue 3): blocks, edges, reachability, dominators, loops with their
depths, static frequencies (back edges 90 %, other branches 50/50) and irreducibility."""

from __future__ import annotations

import pytest

from conftest import DATA
from ptxalloc.ir.cfg import CFG
from ptxalloc.ptx import parse, parse_file

HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"
DECLS = ("\t.reg .pred %p<8>;\n\t.reg .b32 %r<20>;\n\t.reg .b64 %rd<8>;\n"
         "\tld.param.u32 %r1, [k_n];\n\tld.param.u64 %rd1, [k_out];\n")


def kernel_cfg(body: str) -> CFG:
    """The CFG of a kernel whose body starts with two loads (%r1 = n, %rd1 = out)."""
    text = HDR + ".visible .entry k(.param .u64 k_out, .param .u32 k_n)\n{\n" + DECLS + body + "}\n"
    return CFG(parse(text, "k.ptx").functions[0])


def file_cfg(path, name=None) -> CFG:
    m = parse_file(str(path))
    return CFG(m.function(name) if name else m.functions[0])


def edges(cfg: CFG) -> dict[int, list[int]]:
    return {b.id: list(b.succs) for b in cfg.blocks}


def check_consistency(cfg: CFG) -> None:
    """Invariants every CFG keeps: preds mirror succs, instruction ids are positions and every
    instruction is in exactly one block."""
    fn_instrs = cfg.fn.instructions()
    assert cfg.instrs == fn_instrs
    seen = []
    for b in cfg.blocks:
        assert b.first == len(seen)
        for k, ins in enumerate(b.instrs):
            assert cfg.instrs[b.first + k] is ins
            assert cfg.block_of[b.first + k] == b.id
            assert cfg.instr_id(b, k) == b.first + k
        seen.extend(b.instrs)
        for s in b.succs:
            assert b.id in cfg.blocks[s].preds
        for p in b.preds:
            assert b.id in cfg.blocks[p].succs
        assert len(set(b.succs)) == len(b.succs)
    assert seen == fn_instrs
    assert cfg.blocks[0].reachable
    for b in cfg.blocks:
        if not b.reachable:
            assert b.freq == 0.0


# --- shapes -----------------------------------------------------------------------------------


def test_diamond():
    cfg = file_cfg(DATA / "hand" / "diamond.ptx")
    check_consistency(cfg)
    assert len(cfg.blocks) == 4
    assert edges(cfg) == {0: [2, 1], 1: [3], 2: [3], 3: []}
    assert [sorted(b.preds) for b in cfg.blocks] == [[], [0], [0], [1, 2]]
    assert [b.labels for b in cfg.blocks] == [[], [], ["$L_then"], ["$L_join"]]
    assert [len(b.instrs) for b in cfg.blocks] == [4, 3, 2, 4]
    assert [b.freq for b in cfg.blocks] == pytest.approx([1.0, 0.5, 0.5, 1.0])
    assert all(b.reachable and b.depth == 0 for b in cfg.blocks)
    assert cfg.idom == [0, 0, 0, 0]
    assert cfg.dominates(0, 3) and not cfg.dominates(1, 3) and not cfg.dominates(2, 3)
    assert cfg.loops == [] and not cfg.irreducible


def test_guarded_and_unguarded_bra():
    cfg = kernel_cfg("\tsetp.eq.u32 %p1, %r1, 0;\n"
                     "\t@%p1 bra $L_x;\n"          # guarded: target and fall-through
                     "\tadd.s32 %r2, %r1, 1;\n"
                     "\tbra.uni $L_y;\n"           # unguarded: only the target
                     "$L_x:\n"
                     "\tadd.s32 %r2, %r1, 2;\n"
                     "$L_y:\n"
                     "\tst.global.u32 [%rd1], %r2;\n"
                     "\tret;\n")
    check_consistency(cfg)
    assert edges(cfg) == {0: [2, 1], 1: [3], 2: [3], 3: []}
    assert cfg.blocks[1].instrs[-1].opcode == "bra.uni"


def test_branch_to_the_next_block_is_one_edge():
    cfg = kernel_cfg("\tsetp.eq.u32 %p1, %r1, 0;\n"
                     "\t@%p1 bra $L_n;\n"
                     "$L_n:\n"
                     "\tret;\n")
    assert edges(cfg) == {0: [1], 1: []}
    assert cfg.blocks[1].preds == [0]
    assert cfg.blocks[1].freq == pytest.approx(1.0)


def test_brx_idx_successors():
    cfg = file_cfg(DATA / "hand" / "brx.ptx")
    check_consistency(cfg)
    assert cfg.blocks[0].instrs[-1].opcode == "brx.idx"
    assert [cfg.blocks[s].labels for s in cfg.blocks[0].succs] == [
        ["$L_c0"], ["$L_c1"], ["$L_c2"], ["$L_c3"]]
    join = cfg.blocks[-1]
    assert join.labels == ["$L_done"] and sorted(join.preds) == [1, 2, 3, 4]
    assert [b.freq for b in cfg.blocks] == pytest.approx([1.0, 0.25, 0.25, 0.25, 0.25, 1.0])


def test_brx_idx_with_repeated_target_and_guard():
    cfg = kernel_cfg("\tand.b32 %r2, %r1, 3;\n"
                     "\tsetp.eq.u32 %p1, %r1, 0;\n"
                     "\t$T: .branchtargets $L_a, $L_b, $L_a;\n"
                     "\t@%p1 brx.idx %r2, $T;\n"
                     "\tadd.s32 %r3, %r1, 1;\n"
                     "$L_a:\n"
                     "\tadd.s32 %r3, %r1, 2;\n"
                     "$L_b:\n"
                     "\tret;\n")
    check_consistency(cfg)
    # the listed labels, each once, then the fall-through of the guarded brx
    assert edges(cfg)[0] == [2, 3, 1]


@pytest.mark.parametrize("term", ["ret", "exit", "trap"])
def test_unguarded_terminators_have_no_successor(term):
    cfg = kernel_cfg(f"\tsetp.eq.u32 %p1, %r1, 0;\n"
                     f"\t@%p1 bra $L_t;\n"
                     f"\t{term};\n"
                     f"$L_t:\n"
                     f"\tst.global.u32 [%rd1], %r1;\n"
                     f"\tret;\n")
    check_consistency(cfg)
    assert edges(cfg) == {0: [2, 1], 1: [], 2: []}
    assert cfg.blocks[1].instrs[-1].opcode == term


@pytest.mark.parametrize("term", ["ret", "exit", "trap"])
def test_guarded_terminators_fall_through(term):
    cfg = kernel_cfg(f"\tsetp.eq.u32 %p1, %r1, 0;\n"
                     f"\t@%p1 {term};\n"
                     f"\tst.global.u32 [%rd1], %r1;\n"
                     f"\tret;\n")
    check_consistency(cfg)
    assert len(cfg.blocks) == 2
    assert edges(cfg) == {0: [1], 1: []}
    assert cfg.blocks[1].reachable
    assert cfg.blocks[0].instrs[-1].opcode == term


def test_trap_and_exit_in_nvcc_output():
    cfg = file_cfg(DATA / "misc_sm80.ptx", "_Z11k_trap_exitPiPKi")
    check_consistency(cfg)
    ends = {b.instrs[-1].opcode: b for b in cfg.blocks if b.instrs}
    assert ends["trap"].succs == [] and ends["exit"].succs == []
    assert ends["ret"].succs == []
    assert all(b.reachable for b in cfg.blocks)


def test_unreachable_block_is_kept_and_marked():
    cfg = kernel_cfg("\tbra.uni $L_end;\n"
                     "\tadd.s32 %r2, %r1, 1;\n"      # no label: nothing reaches it
                     "\tst.global.u32 [%rd1], %r2;\n"
                     "$L_end:\n"
                     "\tret;\n")
    check_consistency(cfg)
    assert len(cfg.blocks) == 3
    dead = cfg.blocks[1]
    assert not dead.reachable and dead.freq == 0.0
    assert [i.opcode for i in dead.instrs] == ["add.s32", "st.global.u32"]
    assert dead.succs == [2]
    assert sorted(cfg.blocks[2].preds) == [0, 1]
    assert cfg.reachable_blocks() == [cfg.blocks[0], cfg.blocks[2]]
    assert cfg.idom[1] == -1
    assert not cfg.dominates(0, 1)
    assert cfg.blocks[2].freq == pytest.approx(1.0)
    assert 1 not in cfg.rpo


def test_body_starting_with_a_label_and_consecutive_labels():
    text = (HDR + ".visible .entry k(.param .u32 k_n)\n{\n\t.reg .b32 %r<3>;\n"
            "\t.reg .pred %p1;\n$L_0:\n$L_1:\n\tld.param.u32 %r1, [k_n];\n"
            "\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 bra $L_1;\n\tret;\n}\n")
    cfg = CFG(parse(text).functions[0])
    check_consistency(cfg)
    assert cfg.blocks[0].labels == ["$L_0", "$L_1"]
    assert edges(cfg) == {0: [0, 1], 1: []}
    assert len(cfg.loops) == 1 and cfg.loops[0].header == 0


# --- loops and frequencies --------------------------------------------------------------------


SIMPLE_LOOP = ("\tmov.u32 %r2, 0;\n"
               "$L_loop:\n"
               "\tadd.s32 %r2, %r2, 1;\n"
               "\tsetp.lt.s32 %p1, %r2, %r1;\n"
               "\t@%p1 bra $L_loop;\n"
               "\tst.global.u32 [%rd1], %r2;\n"
               "\tret;\n")


def test_simple_loop_frequency():
    cfg = kernel_cfg(SIMPLE_LOOP)
    check_consistency(cfg)
    assert edges(cfg) == {0: [1], 1: [1, 2], 2: []}
    assert len(cfg.loops) == 1
    lp = cfg.loops[0]
    assert (lp.header, sorted(lp.blocks), lp.latches, lp.depth, lp.parent) == (1, [1], [1], 1, -1)
    assert [b.depth for b in cfg.blocks] == [0, 1, 0]
    # header: 1 / (1 - 0.9) = 10 times per entry; the exit edge carries the entry's 1.0 back
    assert [b.freq for b in cfg.blocks] == pytest.approx([1.0, 10.0, 1.0])
    assert [b.loop for b in cfg.blocks] == [-1, 0, -1]


def test_loop_entered_on_half_the_paths():
    cfg = file_cfg(DATA / "hand" / "loop_backedge.ptx")
    check_consistency(cfg)
    assert [b.freq for b in cfg.blocks] == pytest.approx([1.0, 5.0, 1.0])
    assert [b.depth for b in cfg.blocks] == [0, 1, 0]


NESTED = ("\tmov.u32 %r2, 0;\n"
          "$L_outer:\n"
          "\tmov.u32 %r3, 0;\n"
          "$L_inner:\n"
          "\tadd.s32 %r3, %r3, 1;\n"
          "\tsetp.lt.s32 %p1, %r3, %r1;\n"
          "\t@%p1 bra $L_inner;\n"
          "\tadd.s32 %r2, %r2, %r3;\n"
          "\tsetp.lt.s32 %p2, %r2, %r1;\n"
          "\t@%p2 bra $L_outer;\n"
          "\tst.global.u32 [%rd1], %r2;\n"
          "\tret;\n")


def test_nested_loops_depths_and_frequencies():
    cfg = kernel_cfg(NESTED)
    check_consistency(cfg)
    assert edges(cfg) == {0: [1], 1: [2], 2: [2, 3], 3: [1, 4], 4: []}
    assert [b.depth for b in cfg.blocks] == [0, 1, 2, 1, 0]
    assert len(cfg.loops) == 2
    outer = next(lp for lp in cfg.loops if lp.header == 1)
    inner = next(lp for lp in cfg.loops if lp.header == 2)
    assert sorted(outer.blocks) == [1, 2, 3] and outer.depth == 1 and outer.parent == -1
    assert sorted(inner.blocks) == [2] and inner.depth == 2 and inner.parent == outer.id
    assert [b.freq for b in cfg.blocks] == pytest.approx([1.0, 10.0, 100.0, 10.0, 1.0])
    assert cfg.dominates(1, 3) and cfg.dominates(2, 3) and not cfg.dominates(3, 2)


def test_two_back_edges_to_one_header_make_one_loop():
    cfg = kernel_cfg("\tmov.u32 %r2, 0;\n"
                     "$L_h:\n"
                     "\tadd.s32 %r2, %r2, 1;\n"
                     "\tsetp.lt.s32 %p1, %r2, 5;\n"
                     "\t@%p1 bra $L_h;\n"            # a 'continue'
                     "\tsetp.lt.s32 %p2, %r2, %r1;\n"
                     "\t@%p2 bra $L_h;\n"
                     "\tret;\n")
    check_consistency(cfg)
    assert len(cfg.loops) == 1
    lp = cfg.loops[0]
    assert lp.header == 1 and sorted(lp.latches) == [1, 2] and sorted(lp.blocks) == [1, 2]
    # c = 0.9 + 0.1 * 0.9 = 0.99: the header runs 100 times per entry
    assert cfg.blocks[1].freq == pytest.approx(100.0)
    assert cfg.blocks[3].freq == pytest.approx(1.0)


def test_k_nest3_depth_three():
    cfg = file_cfg(DATA / "loops_sm80.ptx", "_Z7k_nest3PfPKfiii")
    check_consistency(cfg)
    assert len(cfg.loops) == 3
    assert sorted(lp.depth for lp in cfg.loops) == [1, 2, 3]
    by_depth = {lp.depth: lp for lp in cfg.loops}
    # each loop nests in the one a level up
    assert by_depth[3].parent == by_depth[2].id and by_depth[2].parent == by_depth[1].id
    assert by_depth[3].blocks < by_depth[2].blocks < by_depth[1].blocks
    for lp in cfg.loops:
        for b in lp.blocks:
            assert cfg.dominates(lp.header, b)
            assert cfg.blocks[b].depth >= lp.depth
        for latch in lp.latches:
            assert lp.header in cfg.blocks[latch].succs
    h = cfg.blocks[by_depth[3].header]
    assert h.depth == 3
    # with back edges 90 %, the frequency grows with depth and the exit returns to 1.0
    assert h.freq > cfg.blocks[by_depth[2].header].freq > cfg.blocks[by_depth[1].header].freq
    assert cfg.blocks[-1].freq == pytest.approx(1.0)
    assert not cfg.irreducible


def test_innermost_header_runs_ten_times_per_entry():
    cfg = file_cfg(DATA / "loops_sm80.ptx", "_Z7k_nest3PfPKfiii")
    inner = max(cfg.loops, key=lambda lp: lp.depth)
    h = cfg.blocks[inner.header]
    # the entries into the loop: the outside predecessors' frequency times their edge share
    entering = 0.0
    for p in h.preds:
        if p not in inner.blocks:
            pb = cfg.blocks[p]
            entering += pb.freq / len(pb.succs) if len(pb.succs) > 1 else pb.freq
    assert h.freq == pytest.approx(10.0 * entering)


def test_irreducible_cfg_is_flagged():
    cfg = kernel_cfg("\tsetp.eq.u32 %p1, %r1, 0;\n"
                     "\t@%p1 bra $L_b;\n"
                     "$L_a:\n"
                     "\tadd.s32 %r1, %r1, 1;\n"
                     "$L_b:\n"
                     "\tadd.s32 %r1, %r1, 2;\n"
                     "\tsetp.lt.u32 %p2, %r1, 100;\n"
                     "\t@%p2 bra $L_a;\n"
                     "\tret;\n")
    check_consistency(cfg)
    assert edges(cfg) == {0: [2, 1], 1: [2], 2: [1, 3], 3: []}
    assert cfg.irreducible
    assert cfg.loops == []                      # a cycle with two entries is no natural loop
    assert all(0.0 < b.freq < 10.0 for b in cfg.blocks)


def test_reducible_files_are_not_flagged():
    # Triton's files included: their inline-asm blocks each declare a label 'waitLoop', which
    # resolved function-wide made them irreducible (test_scoped_labels)
    for path in sorted(DATA.glob("**/*.ptx")):
        for fn in parse_file(str(path)).functions:
            cfg = CFG(fn)
            check_consistency(cfg)
            assert not cfg.irreducible, (path.name, fn.name)


@pytest.mark.parametrize("path", sorted(DATA.glob("*.ptx")), ids=lambda p: p.name)
def test_frequencies_are_conserved(path):
    """Flow conservation: a reachable block's frequency is the sum over its predecessors of
    their frequency times the edge probability (loop headers aside), and the function's
    returns together run once."""
    for fn in parse_file(str(path)).functions:
        cfg = CFG(fn)
        headers = {lp.header for lp in cfg.loops}
        for b in cfg.blocks:
            if not b.reachable or b.id == 0 or b.id in headers:
                continue
            inflow = 0.0
            for p in b.preds:
                pb = cfg.blocks[p]
                n = len(pb.succs)
                back = [s for s in pb.succs if any(s == lp.header and p in lp.latches
                                                   for lp in cfg.loops)]
                if n == 1:
                    share = 1.0
                elif back:
                    share = 0.1 / (n - len(back))
                else:
                    share = 1.0 / n
                inflow += pb.freq * share
            assert b.freq == pytest.approx(inflow), (fn.name, b.id)
        exits = sum(b.freq for b in cfg.blocks if b.reachable and not b.succs)
        assert exits == pytest.approx(1.0), fn.name
