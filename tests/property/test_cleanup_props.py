"""Copy propagation and dead-code elimination after allocation keep what a program computes
(``alloc/cleanup.py``): random straight-line blocks of additions, copies (some marked as
inserted ``//@move`` copies) and stores, every register in a place of its own, run through
the pass and interpreted before and after — the stores write the same values in the same
order, and nothing but copies and pure definitions goes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ptxalloc.alloc.cleanup import clean_up
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.edits import Edit, EditKind
from ptxalloc.ir.instruction import Instruction
from ptxalloc.ir.operands import Imm, Mem, Reg
from ptxalloc.ptx import parse

REGS = 4

_op = st.one_of(
    st.tuples(st.just("add"), st.integers(1, REGS), st.integers(1, REGS), st.integers(1, REGS)),
    st.tuples(st.just("addi"), st.integers(1, REGS), st.integers(1, REGS), st.integers(0, 9)),
    st.tuples(st.just("mov"), st.integers(1, REGS), st.integers(1, REGS),
              st.sampled_from([True, True, False])),
    st.tuples(st.just("st"), st.integers(0, 7), st.integers(1, REGS), st.just(0)))


def _text(ops) -> str:
    lines = []
    for kind, a, b, c in ops:
        if kind == "add":
            lines.append(f"\tadd.s32 %r{a}, %r{b}, %r{c};")
        elif kind == "addi":
            lines.append(f"\tadd.s32 %r{a}, %r{b}, {c};")
        elif kind == "mov":
            lines.append(f"\tmov.b32 %r{a}, %r{b};")
        else:
            lines.append(f"\tst.global.u32 [%rd1+{4 * a}], %r{b};")
    return (".version 8.0\n.target sm_80\n.address_size 64\n"
            ".visible .entry k(.param .u64 k_p)\n{\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<2>;\n"
            "\tld.param.u64 %rd1, [k_p];\n" + "\n".join(lines) + "\n\tret;\n}\n")


def _run(fn) -> list[tuple[int, int]]:
    """The stores of the block, interpreted: (offset, value) in order."""
    names = fn.regs.names
    val = {v: (hash(names[v]) % 1000) for v in range(len(names))}
    out = []
    for s in fn.body:
        if type(s) is not Instruction:
            continue

        def read(op):
            return int(op.text) if type(op) is Imm else val[op.v]
        if s.base == "add":
            val[s.ops[0].v] = read(s.ops[1]) + read(s.ops[2])
        elif s.base == "mov" and type(s.ops[1]) is Reg:
            val[s.ops[0].v] = val[s.ops[1].v]
        elif s.base == "st":
            m: Mem = s.ops[0]
            out.append((m.offset, val[s.ops[1].v]))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, min_size=6, max_size=30))
def test_the_pass_keeps_every_store_and_its_value(ops):
    text = _text(ops)
    before = parse(text, "k.ptx").functions[0]
    fn = parse(text, "k.ptx").functions[0]
    flags = iter([c for kind, _, _, c in ops if kind == "mov"])
    for s in fn.body:
        if type(s) is Instruction and s.base == "mov" and type(s.ops[1]) is Reg and next(flags):
            s.origin = Edit(EditKind.MOVE, s.uses[0])
    regs = fn.regs
    mask_of = {v: 3 << (4 * v) for v in range(len(regs.names))}
    clean_up(fn, CFG(fn), mask_of, lambda v: (regs.classes[v], regs.vec[v]), set())
    assert _run(fn) == _run(before)
    kept = [s for s in fn.body if type(s) is Instruction]
    assert sum(s.base == "st" for s in kept) == sum(kind == "st" for kind, *_ in ops)
