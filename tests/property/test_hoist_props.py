"""Property test of loop-invariant hoisting (issue 17, :mod:`ptxalloc.passes.hoist`): on random
loops written as PTX text — a preheader, a body of 32-bit arithmetic over a small register pool
with a conditionally skipped part, invariants and loop-variant values mixed — the hoisted
function computes what the original computes (run by a small interpreter of the instructions
used, every register stored after the loop; a value the original leaves undefined may become
defined, a refinement) and the validator accepts exactly what the pass did.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ptxalloc.alloc.output import hoist_lines
from ptxalloc.ir.instruction import COMMENT, Instruction, Label, Raw
from ptxalloc.ir.operands import Reg
from ptxalloc.passes.hoist import hoist_function
from ptxalloc.ptx import parse
from ptxalloc.verify.hoist import hoisted_original

POOL = [f"%r{k}" for k in range(1, 9)]       # %r1..%r4 set before the loop
MASK = 0xFFFFFFFF

operand = st.one_of(st.sampled_from(POOL), st.integers(0, 9).map(str))
instruction = st.tuples(st.sampled_from(["add.s32", "mul.lo.s32", "xor.b32", "sub.s32"]),
                        st.sampled_from(POOL), st.sampled_from(POOL), operand)


def program(before, body, skipped, trips: int) -> str:
    lines = [f"mov.u32 {r}, {v};" for r, v in zip(POOL[:4], before)]
    lines += ["mov.u32 %i, 0;", "bra.uni LOOP;", "LOOP:"]
    lines += [f"{op} {d}, {a}, {b};" for op, d, a, b in body]
    lines += ["and.b32 %t, %i, 1;", "setp.eq.s32 %q, %t, 0;", "@%q bra SKIP;"]
    lines += [f"{op} {d}, {a}, {b};" for op, d, a, b in skipped]
    lines += ["SKIP:", "add.s32 %i, %i, 1;", f"setp.lt.s32 %p, %i, {trips};", "@%p bra LOOP;"]
    lines += [f"st.global.u32 [%rd1+{4 * k}], {r};" for k, r in enumerate(POOL)]
    lines += ["ret;"]
    return (".version 7.0\n.target sm_80\n.address_size 64\n\n.visible .entry k(.param .u64 a)\n"
            "{\n.reg .b32 %r<9>;\n.reg .b32 %i;\n.reg .b32 %t;\n.reg .pred %p;\n.reg .pred %q;\n"
            ".reg .b64 %rd1;\nld.param.u64 %rd1, [a];\n" + "\n".join(lines) + "\n}\n")


def run(fn) -> list:
    """The values stored, in order (None: read from a register no definition reached)."""
    body = [s for s in fn.body if type(s) in (Instruction, Label)]
    at = {s.name: k for k, s in enumerate(body) if type(s) is Label}
    regs: dict[int, object] = {}
    stored = []

    def value(op):
        return regs.get(op.v) if type(op) is Reg else int(op.text, 0)

    pc = 0
    while pc < len(body):
        s = body[pc]
        pc += 1
        if type(s) is Label:
            continue
        if s.guard >= 0 and bool(regs.get(s.guard)) == s.guard_neg:
            continue
        op, ops = s.opcode, s.ops
        if op.startswith("bra"):
            pc = at[ops[0].text]
        elif op == "ret":
            break
        elif op.startswith("st.global"):
            stored.append(value(ops[1]))
        elif op.startswith("ld.param"):
            regs[ops[0].v] = 0
        else:
            args = [value(o) for o in ops[1:]]
            if None in args:
                regs[ops[0].v] = None
                continue
            if op.startswith("mov"):
                r = args[0]
            elif op.startswith("setp.eq"):
                r = args[0] == args[1]
            elif op.startswith("setp.lt"):
                r = args[0] < args[1]
            else:
                a, b = args
                r = {"add": a + b, "sub": a - b, "mul": a * b, "xor": a ^ b,
                     "and": a & b}[s.base] & MASK
            regs[ops[0].v] = r
    return stored


@settings(max_examples=150, deadline=None)
@given(before=st.lists(st.integers(0, 9), min_size=4, max_size=4),
       body=st.lists(instruction, max_size=7), skipped=st.lists(instruction, max_size=3),
       trips=st.integers(1, 3))
def test_hoisting_preserves_what_the_loop_computes(before, body, skipped, trips):
    fn = parse(program(before, body, skipped, trips), "p.ptx").functions[0]
    h = hoist_function(fn)
    if h is None:
        return
    want, got = run(fn), run(h.function)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w is None or w == g
    fake = fn.copy()
    fake.body = [Raw(COMMENT, line) for line in hoist_lines(h.groups)] + fake.body
    replayed = hoisted_original(fn, fake)
    assert [id(s) for s in replayed.body] == [id(s) for s in h.function.body]
