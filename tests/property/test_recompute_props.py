"""Recomputation at the use on random programs (issue 13): the generator of
``test_fuzz_alloc`` (loops, diamonds, guarded definitions, every register class) feeds the pass;
its rewriting is always proven by the validator and never raises MaxLive, and the same
rewriting with one operand of one inserted recomputation changed is always refuted."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest

from ptxalloc.analysis import pressure_of
from ptxalloc.errors import VerificationError
from ptxalloc.ir.operands import Reg
from ptxalloc.passes.recompute import recompute_function
from ptxalloc.ptx import parse
from ptxalloc.verify.recompute import check_recomputation
from test_fuzz_alloc import programs

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(st.booleans().flatmap(lambda c: programs(calls=c)), st.randoms(use_true_random=False))
def test_rewriting_proven_and_a_changed_operand_refuted(text, rnd):
    for fn in parse(text).functions:
        r = recompute_function(fn)
        if r is None:
            continue
        check_recomputation(fn, r.function)
        before, after = pressure_of(fn), pressure_of(r.function)
        assert after.max_live <= before.max_live and after.max_preds <= before.max_preds
        # change one register operand of one inserted recomputation to another register of
        # the same type: the expression differs, and the validator must see it
        n_orig = len(fn.regs)
        body = r.function.body
        regs = r.function.regs
        sites = [k for k, s in enumerate(body) if getattr(s, "defs", ()) and s.defs[0] >= n_orig
                 and any(type(op) is Reg for op in s.ops[1:])]
        if not sites:
            continue
        k = rnd.choice(sites)
        ins = body[k]
        pos = rnd.choice([j for j, op in enumerate(ins.ops) if j and type(op) is Reg])
        old = ins.ops[pos].v
        # not the register ``old`` recomputes (``%r0`` for ``%r0$rc0``): it holds the same
        # value there, and the validator rightly proves that change
        same = regs.names[old].split("$rc")[0]
        others = [v for v in range(n_orig) if v != old and regs.types[v] == regs.types[old]
                  and regs.vec[v] == regs.vec[old] and regs.names[v] != same]
        if not others:
            continue
        ops = list(ins.ops)
        ops[pos] = Reg(rnd.choice(others))
        bad = r.function.copy()
        bad.body = body[:k] + [ins.copy_with(ops)] + body[k + 1:]
        with pytest.raises(VerificationError):
            check_recomputation(fn, bad)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["GPR32", "GPR64", "H16", "PRED"]), min_size=2, max_size=300),
       st.data())
def test_narrower_sums_the_widths_of_the_extended_registers(classes, data):
    """_narrower: the general registers of a bitset (any of them wide, at any register
    number) together narrower than the value whose range they take over; False as soon as one
    is not a 32- or 64-bit register."""
    from types import SimpleNamespace

    from ptxalloc.ir.registers import CLASS_BITS, RegClass
    from ptxalloc.passes.recompute import _narrower
    regs = SimpleNamespace(classes=[RegClass[c] for c in classes])
    v = data.draw(st.integers(0, len(classes) - 1))
    members = data.draw(st.sets(st.integers(0, len(classes) - 1), max_size=4))
    extended = sum(1 << u for u in members)
    general = (RegClass.GPR32, RegClass.GPR64)
    if regs.classes[v] not in general or any(regs.classes[u] not in general for u in members):
        expected = False
    else:
        expected = sum(CLASS_BITS[regs.classes[u]] for u in members) < CLASS_BITS[regs.classes[v]]
    assert _narrower(regs, extended, v) == expected
