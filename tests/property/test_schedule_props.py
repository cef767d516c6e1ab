"""Pressure-aware scheduling on random straight-line code (issue 13): loads, stores and
arithmetic over a few registers and a few aliasing addresses. The scheduler's order is always
accepted by the validator and computes what the original computes (a small interpreter runs
both), and every order the validator accepts does: a random order the validator accepts never
changes the result, whatever it moved (loads past loads included)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxalloc.analysis import pressure_of
from ptxalloc.errors import VerificationError
from ptxalloc.passes.schedule import schedule_function
from ptxalloc.ptx import parse
from ptxalloc.verify.schedule import check_schedule

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
REGS = 6
SLOTS = 6


def _op():
    reg = st.integers(1, REGS)
    slot = st.integers(0, SLOTS - 1)
    return st.one_of(st.tuples(st.just("ld"), reg, slot), st.tuples(st.just("st"), slot, reg),
                     st.tuples(st.sampled_from(["add", "mul"]), reg, reg, reg),
                     st.tuples(st.just("mov"), reg, st.integers(0, 9)))


def _program(body):
    """The instruction list (prelude, body, the registers stored at the end) and its PTX."""
    ops = [("param",)] + [("mov", r, r) for r in range(1, REGS + 1)] + list(body)
    ops += [("out", r) for r in range(1, REGS + 1)]
    lines = []
    for op in ops:
        kind = op[0]
        if kind == "param":
            lines.append("ld.param.u64 %rd1, [k_p];")
        elif kind == "mov":
            lines.append(f"mov.u32 %r{op[1]}, {op[2]};")
        elif kind == "ld":
            lines.append(f"ld.global.u32 %r{op[1]}, [%rd1+{4 * op[2]}];")
        elif kind == "st":
            lines.append(f"st.global.u32 [%rd1+{4 * op[1]}], %r{op[2]};")
        elif kind == "out":
            lines.append(f"st.global.u32 [%rd1+{4 * (SLOTS + op[1])}], %r{op[1]};")
        else:
            lines.append(f"{kind}.{'s32' if kind == 'add' else 'lo.s32'} %r{op[1]}, %r{op[2]}, "
                         f"%r{op[3]};")
    text = (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 k_p)\n"
            "{\n\t.reg .b32 %r<" + str(REGS + 1) + ">;\n\t.reg .b64 %rd<2>;\n\t"
            + "\n\t".join(lines) + "\n\tret;\n}\n")
    return ops, text


def _run(ops, order):
    """Final memory after executing ``ops`` in ``order`` (the trailing ``ret`` left out)."""
    mem = {s: 7 * s + 3 for s in range(2 * SLOTS + REGS + 1)}
    r = {}
    for i in order:
        op = ops[i]
        kind = op[0]
        if kind == "mov":
            r[op[1]] = op[2]
        elif kind == "ld":
            r[op[1]] = mem[op[2]]
        elif kind == "st":
            mem[op[1]] = r[op[2]]
        elif kind == "out":
            mem[SLOTS + op[1]] = r[op[1]]
        elif kind == "add":
            r[op[1]] = (r[op[2]] + r[op[3]]) & 0xFFFFFFFF
        elif kind == "mul":
            r[op[1]] = (r[op[2]] * r[op[3]]) & 0xFFFFFFFF
    return mem


@SETTINGS
@given(st.lists(_op(), min_size=2, max_size=24))
def test_the_schedule_is_validated_and_computes_the_same(body):
    ops, text = _program(body)
    fn = parse(text, "k.ptx").functions[0]
    s = schedule_function(fn)
    if s is None:
        return
    check_schedule(fn, s.order)
    n = len(ops)
    assert s.order[n] == n                      # ret stays last
    assert _run(ops, s.order[:n]) == _run(ops, range(n))
    assert pressure_of(s.function).max_live <= pressure_of(fn).max_live


@SETTINGS
@given(st.lists(_op(), min_size=2, max_size=24), st.randoms(use_true_random=False))
def test_every_order_the_validator_accepts_computes_the_same(body, rnd):
    ops, text = _program(body)
    fn = parse(text, "k.ptx").functions[0]
    n = len(ops)
    order = list(range(n))
    # a random walk of adjacent swaps, each kept only when the validator accepts it
    for _ in range(3 * n):
        k = rnd.randrange(n - 1)
        trial = order[:k] + [order[k + 1], order[k]] + order[k + 2:]
        try:
            check_schedule(fn, trial + [n])
        except VerificationError:
            continue
        order = trial
    assert _run(ops, order) == _run(ops, range(n))
