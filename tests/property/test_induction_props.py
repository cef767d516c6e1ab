"""Property test of loop-carried pointer families as induction variables (issue 13,
:mod:`ptxalloc.passes.induction`): on random loops written as PTX text — pointers entered as
``base + mul.wide(index, 4)`` from one of two bases, read by loads, stores and address
arithmetic in the loop, advanced by one stride at its end, with hazards mixed in (a member
written elsewhere in the loop, advanced by another stride, read between the advances, read after
the loop, its offset redefined in the loop) — the rewritten function makes the same memory
accesses with the same values as the original (run by a small interpreter of the instructions
used), the validator accepts every record the pass wrote and replays it to the same function,
and without hazards a base with two members or more always gives a family.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ptxalloc.ir.induction import apply_families
from ptxalloc.ir.instruction import Instruction, Label
from ptxalloc.ir.operands import Mem, Reg
from ptxalloc.passes.induction import induction_function
from ptxalloc.ptx import parse
from ptxalloc.verify.induction import check_families

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
PARAMS = {"a": 0x10000, "b": 0x900000, "s": 12}

access = st.tuples(st.sampled_from(["ld", "st", "addr"]), st.integers(0, 4),
                   st.sampled_from([0, 4, 8]))
hazard = st.sampled_from(["write", "stride", "between", "live_out", "offset"])


def program(bases, indices, body, hazards, stride_imm, trips) -> str:
    n = len(bases)
    lines = ["ld.param.u64 %rd1, [a];", "ld.param.u64 %rd2, [b];", "ld.param.u32 %r9, [s];",
             "mul.wide.s32 %rd3, %r9, 4;"]
    for k in range(n):
        lines += [f"mov.u32 %r{k + 1}, {indices[k]};",
                  f"mul.wide.s32 %rd{10 + k}, %r{k + 1}, 4;",
                  f"add.s64 %rd{20 + k}, %rd{bases[k]}, %rd{10 + k};"]
    lines += ["mov.u32 %r16, 0;", "mov.u32 %i, 0;", "LOOP:"]
    for kind, k, off in body:
        p = f"%rd{20 + k % n}"
        if kind == "ld":
            lines += [f"ld.global.u32 %r15, [{p}+{off}];", "add.s32 %r16, %r16, %r15;"]
        elif kind == "st":
            lines += [f"st.global.u32 [{p}+{off}], %i;"]
        else:
            lines += [f"add.s64 %rd30, {p}, {off};", "st.global.u32 [%rd30], %r16;"]
    h = {x[0]: x[1] % n for x in hazards}
    if "write" in h:
        lines += [f"add.s64 %rd{20 + h['write']}, %rd{20 + h['write']}, 16;"]
    if "offset" in h:
        lines += [f"add.s64 %rd{10 + h['offset']}, %rd{10 + h['offset']}, 4;"]
    stride = stride_imm if stride_imm is not None else "%rd3"
    for k in range(n):
        s = "8" if h.get("stride") == k else stride
        lines += [f"add.s64 %rd{20 + k}, %rd{20 + k}, {s};"]
        if k == 0 and "between" in h:
            lines += [f"ld.global.u32 %r15, [%rd{20 + h['between']}];",
                      "add.s32 %r16, %r16, %r15;"]
    lines += ["add.s32 %i, %i, 1;", f"setp.lt.s32 %p, %i, {trips};", "@%p bra LOOP;"]
    if "live_out" in h:
        lines += [f"st.global.u32 [%rd{20 + h['live_out']}], %r16;"]
    lines += ["st.global.u32 [%rd1], %r16;", "ret;"]
    return (".version 7.0\n.target sm_80\n.address_size 64\n\n.visible .entry k(.param .u64 a, "
            ".param .u64 b, .param .u32 s)\n{\n.reg .b32 %r<20>;\n.reg .b32 %i;\n"
            ".reg .pred %p;\n.reg .b64 %rd<40>;\n" + "\n".join(lines) + "\n}\n")


def run(fn) -> list:
    """The memory accesses, in order: (kind, address, value)."""
    body = [s for s in fn.body if type(s) in (Instruction, Label)]
    at = {s.name: k for k, s in enumerate(body) if type(s) is Label}
    regs: dict[int, int] = {}
    trace = []

    def value(op):
        return regs[op.v] if type(op) is Reg else int(op.text, 0)

    def address(m: Mem) -> int:
        return (regs[m.base.v] + int(m.offset.replace("+", "") or 0)) & M64

    pc = 0
    while pc < len(body):
        s = body[pc]
        pc += 1
        if type(s) is Label or (s.guard >= 0 and not regs[s.guard]):
            continue
        op, ops = s.opcode, s.ops
        if op.startswith("bra"):
            pc = at[ops[0].text]
        elif op == "ret":
            break
        elif op.startswith("ld.param"):
            regs[ops[0].v] = PARAMS[ops[1].base.text]
        elif op.startswith("ld.global"):
            a = address(ops[1])
            regs[ops[0].v] = (a * 2654435761) & M32
            trace.append(("ld", a, regs[ops[0].v]))
        elif op.startswith("st.global"):
            trace.append(("st", address(ops[0]), value(ops[1])))
        elif op.startswith("mov"):
            regs[ops[0].v] = value(ops[1])
        elif op == "mul.wide.s32":
            a = value(ops[1])
            a = a - (1 << 32) if a >> 31 else a
            regs[ops[0].v] = (a * value(ops[2])) & M64
        elif op in ("add.s64", "add.u64"):
            regs[ops[0].v] = (value(ops[1]) + value(ops[2])) & M64
        elif op == "add.s32":
            regs[ops[0].v] = (value(ops[1]) + value(ops[2])) & M32
        elif op == "setp.lt.s32":
            regs[ops[0].v] = value(ops[1]) < value(ops[2])
        else:
            raise AssertionError(f"the interpreter does not know {op}")
    return trace


@settings(max_examples=150, deadline=None)
@given(bases=st.lists(st.sampled_from([1, 2]), min_size=2, max_size=5),
       indices=st.lists(st.integers(-3, 40), min_size=5, max_size=5),
       body=st.lists(access, max_size=6), hazards=st.lists(st.tuples(hazard, st.integers(0, 4)),
                                                             max_size=2),
       stride_imm=st.sampled_from([None, "64", "-4"]), trips=st.integers(1, 3))
def test_rewritten_loops_access_memory_as_the_original(bases, indices, body, hazards,
                                                       stride_imm, trips):
    fn = parse(program(bases, indices, body, hazards, stride_imm, trips), "p.ptx").functions[0]
    got = induction_function(fn)
    if got is None:
        # without hazards, a base with two members always makes a family
        assert hazards or max(bases.count(1), bases.count(2)) < 2
        return
    assert run(got.function) == run(fn)
    check_families(fn, got.families)
    replayed = apply_families(fn, got.families)
    assert [i.render(replayed.regs.names.__getitem__) for i in replayed.instructions()] == \
        [i.render(got.function.regs.names.__getitem__) for i in got.function.instructions()]


def test_the_interpreter_sees_a_wrong_rewrite():
    """The property has teeth: a record missing one read changes the accesses."""
    fn = parse(program([1, 1, 2], [0, 5, 9, 0, 0], [("ld", 0, 0), ("ld", 1, 4)], [], None, 3),
               "p.ptx").functions[0]
    got = induction_function(fn)
    family = got.families[0]
    wrong = family._replace(reads=family.reads[:-1])
    assert run(apply_families(fn, [wrong])) != run(fn)
