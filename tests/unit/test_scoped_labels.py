"""Labels are scoped to their ``{ }`` block (PTX ISA "{ }": a scope; ptxas accepts one label
name in sibling blocks and rejects a branch to a label of a block that does not enclose it):
the parser resolves each branch to the label visible from its scope and renames shadowing
definitions (``waitLoop$1``), so the CFG, the checker's own blocks, liveness and the emitted
PTX all see the scoped resolution. Triton's inline asm is the real case (``waitLoop`` in
three blocks of one function)."""

from __future__ import annotations

import re

import pytest

from conftest import DATA, assert_verified
from ptxalloc import ptxas
from ptxalloc.analysis.liveness import Liveness
from ptxalloc.errors import PtxSyntaxError
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.instruction import Instruction, Label
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import emit_module, parse, parse_file
from ptxalloc.util import bits
from ptxalloc.verify.blocks import Blocks

HAND = DATA / "hand" / "scoped_labels.ptx"
TRITON_FWD = [DATA / "triton" / "attn_fwd_tma_64x64_d64.ptx",
              DATA / "triton" / "attn_fwd_tma_128x128_d128.ptx"]
HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"


def kernel(body: str) -> str:
    return (HDR + ".visible .entry k(.param .u32 k_n)\n{\n\t.reg .pred %p<3>;\n"
            "\t.reg .b32 %r<4>;\n\tld.param.u32 %r1, [k_n];\n" + body + "\tret;\n}\n")


def _branch_edges(fn, succs_of, labels_of, first_of) -> list[tuple[int, int]]:
    """(line of each 'bra', line of the label its block's branch goes to) over a function,
    from a block structure given by accessors (the CFG's or the checker's)."""
    lines = {}
    for s in fn.body:
        if type(s) is Label:
            lines[s.name] = s.line
    instrs = fn.instructions()
    out = []
    for b, succs in enumerate(succs_of):
        if not succs:
            continue
        n = first_of[b + 1] if b + 1 < len(first_of) else len(instrs)
        if n == 0 or not instrs[n - 1].opcode.startswith("bra"):
            continue
        bra = instrs[n - 1]
        target = next(op.text for op in bra.ops if type(op).__name__ == "Sym")
        (dest,) = [t for t in succs if target in labels_of[t]]
        out.append((bra.line, lines[labels_of[dest][0]]))
    return out


def cfg_branch_edges(fn) -> list[tuple[int, int]]:
    cfg = CFG(fn)
    return _branch_edges(fn, [b.succs for b in cfg.blocks], [b.labels for b in cfg.blocks],
                         [b.first for b in cfg.blocks])


def checker_branch_edges(fn) -> list[tuple[int, int]]:
    bl = Blocks(fn.body, fn.branch_targets, fn.name)
    return _branch_edges(fn, bl.succs, bl.labels, bl.first)


# --- the hand-written function: 'waitLoop' in two sibling blocks ----------------------------


def test_sibling_blocks_branch_to_their_own_label():
    m = parse_file(str(HAND))
    assert m.warnings == []                       # legal PTX: no duplicate-label warning
    (fn,) = m.functions
    # the branch at line 30 loops to the label at line 27, the one at 40 to the one at 37
    assert cfg_branch_edges(fn) == [(30, 27), (40, 37)]
    assert checker_branch_edges(parse(HAND.read_text(), str(HAND), roles=False).functions[0]) \
        == [(30, 27), (40, 37)]
    cfg = CFG(fn)
    assert not cfg.irreducible and len(cfg.loops) == 2
    assert [b.labels for b in cfg.blocks if b.labels] == [["waitLoop"], ["waitLoop$1"]]


def test_value_of_one_block_is_not_live_in_the_other():
    (fn,) = parse_file(str(HAND)).functions
    cfg = CFG(fn)
    lv = Liveness(cfg)
    names = fn.regs.names

    def live_in(b):
        return {names[v] for v in bits(lv.live_in[b])}

    assert live_in(0) == set()                    # nothing is read undefined
    a_loop, b_loop = [b.id for b in cfg.blocks if b.labels]
    assert "%b" not in live_in(a_loop) and "%r3" not in live_in(a_loop)
    assert "%a" not in live_in(b_loop) and "%b" in live_in(b_loop)


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("k", [4, 5, 8, 255])
def test_scoped_labels_allocate_proven_and_assemble(allocator, k):
    res = allocate(HAND.read_text(), k, allocator, filename=str(HAND))
    assert_verified(res)
    fr, = res.functions
    assert fr.registers <= k
    # the output keeps the scoping explicit: two distinct labels, each branched to once
    assert re.findall(r"^(waitLoop\S*):", res.ptx, re.M) == ["waitLoop", "waitLoop$1"]
    assert re.findall(r"bra\s+(waitLoop\S*);", res.ptx) == ["waitLoop", "waitLoop$1"]
    if ptxas.available():
        out = ptxas.assemble(res.ptx, "sm_80")
        assert out.ok, out.output


@pytest.mark.ptxas
def test_unallocated_emission_assembles():
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    out = ptxas.assemble(emit_module(parse_file(str(HAND))), "sm_80")
    assert out.ok, out.output


# --- resolution rules, each as ptxas has them -------------------------------------------------


@pytest.mark.parametrize("body,first", [
    ("L:\n\tadd.u32 %r1, %r1, 1;\nL:\n\tadd.u32 %r1, %r1, 2;\n", 10),
    ("\t{\n\tL:\n\tadd.u32 %r1, %r1, 1;\n\tL:\n\tadd.u32 %r1, %r1, 2;\n\t}\n", 11),
], ids=["function-scope", "inner-block"])
def test_duplicate_in_the_same_scope_still_warns(body, first):
    m = parse(kernel(body), "k.ptx")
    assert [w.message for w in m.warnings] == \
        [f"label 'L' is defined twice in function 'k' (first at line {first})"]


def test_inner_definition_shadows_the_outer_one_both_ways():
    # the inner branch (line 16) goes to the inner L (line 13), the outer branch (line 19) to
    # the outer L (line 10), whichever comes first in the text
    text = kernel("L:\n\tadd.u32 %r1, %r1, 5;\n\t{\n\tL:\n\tadd.u32 %r1, %r1, 1;\n"
                  "\tsetp.lt.u32 %p1, %r1, 10;\n\t@%p1 bra L;\n\t}\n"
                  "\tsetp.lt.u32 %p1, %r1, 20;\n\t@%p1 bra L;\n")
    m = parse(text, "k.ptx")
    assert m.warnings == []
    assert cfg_branch_edges(m.functions[0]) == [(16, 13), (19, 10)]
    # a forward branch from an inner block to a label of the enclosing one
    text = kernel("\t{\n\tsetp.lt.u32 %p1, %r1, 10;\n\t@%p1 bra L;\n\tL:\n"
                  "\tadd.u32 %r1, %r1, 7;\n\t}\nL:\n\tadd.u32 %r1, %r1, 3;\n"
                  "\tsetp.lt.u32 %p1, %r1, 20;\n\t@%p1 bra L;\n")
    assert cfg_branch_edges(parse(text, "k.ptx").functions[0]) == [(12, 13), (19, 16)]
    if ptxas.available():
        assert ptxas.assemble(text, "sm_80").ok


@pytest.mark.parametrize("body", [
    "\t@%p1 bra L;\n\t{\n\tL:\n\tadd.u32 %r1, %r1, 1;\n\t}\n",
    "\t{\n\tL:\n\tadd.u32 %r1, %r1, 1;\n\t}\n\t{\n\t@%p1 bra L;\n\t}\n",
], ids=["into-an-inner-block", "into-a-sibling-block"])
def test_label_of_a_block_not_enclosing_the_branch_is_an_error(body):
    text = kernel("\tsetp.lt.u32 %p1, %r1, 10;\n" + body)
    if ptxas.available():
        assert not ptxas.assemble(text, "sm_80").ok       # "Unknown symbol 'L'"
    with pytest.raises(PtxSyntaxError, match=r"k\.ptx:\d+:\d+: .*branch to unknown label 'L' "
                                             r"\(the label at line \d+ is in a '\{ \}' block"):
        parse(text, "k.ptx")


def test_branchtargets_resolve_from_their_scope_and_are_renamed():
    text = kernel("\t{\n\tL:\n\tadd.u32 %r1, %r1, 1;\n\t}\n\t{\n\tL:\n\tadd.u32 %r1, %r1, 2;\n"
                  "\tts: .branchtargets L, E;\n\tbrx.idx %r1, ts;\n\t}\nE:\n")
    m = parse(text, "k.ptx")
    assert m.warnings == []
    fn = m.functions[0]
    assert fn.branch_targets == {"ts": ["L$1", "E"]}
    assert "ts: .branchtargets L$1, E;" in emit_module(m)
    cfg = CFG(fn)
    brx_block = next(b for b in cfg.blocks if b.instrs and b.instrs[-1].opcode == "brx.idx")
    assert [cfg.blocks[s].labels for s in brx_block.succs] == [["L$1"], ["E"]]
    if ptxas.available():
        assert ptxas.assemble(emit_module(m), "sm_80").ok


def test_fresh_name_does_not_collide_with_an_existing_label():
    text = kernel("\t{\n\tL:\n\tadd.u32 %r1, %r1, 1;\n\t@%p1 bra L;\n\t}\n"
                  "\t{\n\tL:\n\tadd.u32 %r1, %r1, 2;\n\t@%p1 bra L;\n\t}\n"
                  "L$1:\n\tadd.u32 %r1, %r1, 3;\n\t@%p1 bra L$1;\n")
    m = parse(text, "k.ptx")
    assert m.warnings == []
    labels = [s.name for s in m.functions[0].body if type(s) is Label]
    assert labels == ["L", "L$2", "L$1"]
    assert cfg_branch_edges(m.functions[0]) == [(13, 11), (18, 16), (22, 20)]


# --- Triton's inline asm ----------------------------------------------------------------------


@pytest.mark.parametrize("path", TRITON_FWD, ids=lambda p: p.name)
def test_triton_wait_loops_branch_to_their_own_label(path):
    m = parse_file(str(path))
    assert not [w for w in m.warnings if "label" in w.message]
    (fn,) = m.functions
    defs = [s.line for s in fn.body if type(s) is Label and s.name.startswith("waitLoop")]
    bras = [s.line for s in fn.body if type(s) is Instruction and s.opcode.startswith("bra")
            and any(getattr(op, "text", "").startswith("waitLoop") for op in s.ops)]
    assert len(defs) == len(bras) == 3
    expected = list(zip(bras, defs))            # each loops back to the label 3 lines above
    assert [e for e in cfg_branch_edges(fn) if e[0] in bras] == expected
    alloc_fn = parse(path.read_text(), str(path), roles=False).functions[0]
    assert [e for e in checker_branch_edges(alloc_fn) if e[0] in bras] == expected
    assert not CFG(fn).irreducible
