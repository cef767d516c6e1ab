"""Property tests of the shortcuts `analyze`'s walks take (issue 16, branch analyze9): the range
unions of the interference scan, the blocks a walk over a few values visits, and the order of
the moves the scan records, each held to the obvious computation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ptxalloc.analysis.interference import InterferenceGraph, _range_or
from ptxalloc.analysis.liveness import Liveness
from ptxalloc.ir.cfg import CFG
from ptxalloc.ptx import parse
from test_analysis_props import programs


def _union(masks: list[int], i: int, j: int) -> int:
    x = 0
    for m in masks[i:j + 1]:
        x |= m
    return x


@st.composite
def masks_and_range(draw, disjoint: bool):
    if disjoint:
        # a block that defines each register once: distinct registers, some instructions none
        regs = draw(st.lists(st.integers(0, 200), min_size=1, max_size=40, unique=True))
        masks = [0 if draw(st.booleans()) and k % 3 == 0 else 1 << v
                 for k, v in enumerate(regs)]
    else:
        masks = draw(st.lists(st.integers(0, (1 << 70) - 1), min_size=1, max_size=40))
    i = draw(st.integers(0, len(masks) - 1))
    j = draw(st.integers(i, len(masks) - 1))
    return masks, i, j


@settings(max_examples=200, deadline=None)
@given(got=st.one_of(masks_and_range(True), masks_and_range(False)))
def test_range_union_is_the_union_of_the_range(got):
    """The prefix-sum query (masks of distinct registers) and the sparse table (masks that
    share a register) both answer the union of the masks in the range."""
    masks, i, j = got
    assert _range_or(masks)(i, j) == _union(masks, i, j)


def test_range_union_of_masks_sharing_a_register():
    """Two masks holding one register: an exclusive or of prefixes would drop it."""
    masks = [0b011, 0b100, 0b001]
    assert _range_or(masks)(0, 2) == 0b111
    assert _range_or(masks)(1, 2) == 0b101


@settings(max_examples=60, deadline=None)
@given(prog=programs())
def test_references_are_the_registers_each_block_reads_or_defines(prog):
    fn = parse(prog.text(), "random.ptx").functions[0]
    cfg = CFG(fn)
    lv = Liveness(cfg)
    for b in cfg.blocks:
        named = 0
        for ins in b.instrs:
            for v in ins.defs + ins.uses:
                named |= 1 << v
        assert lv.references[b.id] == named
    for want in range(1 << min(len(fn.regs), 6)):
        assert lv.blocks_referencing(want) == [b for b in cfg.blocks
                                               if lv.references[b.id] & want]


@settings(max_examples=60, deadline=None)
@given(prog=programs())
def test_moves_in_block_order_last_copy_first(prog):
    """The scan records the copies block by block in the function's order, and within a block
    from its last instruction up (the order the coalescer meets them), though it walks the
    blocks last first."""
    fn = parse(prog.text(), "random.ptx").functions[0]
    cfg = CFG(fn)
    g = InterferenceGraph(cfg, Liveness(cfg))
    expected = [(b.first + k, ins.defs[0], ins.uses[0]) for b in cfg.blocks
                for k, ins in reversed(list(enumerate(b.instrs))) if ins.is_copy]
    assert g.moves == expected
