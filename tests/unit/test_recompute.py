"""Recomputation at the use before allocation (issue 13, seed 002 "Rematerialization"): what the
pass does on hand-written PTX (an address and a predicate formed at the access inside a loop),
what it leaves alone (an operand redefined on one path, a definition that does not reach), its
available-expressions validator refusing wrong rewritings, and the whole chain — recompute,
allocate, ``verify ORIGINAL ALLOCATED`` — proven and assembled, on hand-written and Triton PTX."""

from __future__ import annotations

import re

import pytest

from conftest import DATA
from ptxalloc import ptxas
from ptxalloc.analysis import pressure_of
from ptxalloc.cli import main
from ptxalloc.errors import VerificationError
from ptxalloc.ir.operands import Imm
from ptxalloc.ir.recompute import Recompute, apply_recomputations
from ptxalloc.passes.recompute import plan, recompute_choices, recompute_function
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse, parse_file
from ptxalloc.verify import parse_allocated, verify_modules
from ptxalloc.verify.recompute import check_recomputation

LOOP = DATA / "hand" / "recompute_loop.ptx"
PATHS = DATA / "hand" / "recompute_paths.ptx"
CHAIN = DATA / "hand" / "recompute_chain.ptx"
PREDICATES = DATA / "hand" / "recompute_predicates.ptx"
TRITON = DATA / "triton"


def render(fn) -> list[str]:
    return [" ".join(i.render(fn.regs.names.__getitem__).split()) for i in fn.instructions()]


def index_of(fn, text: str) -> int:
    return render(fn).index(text)


def test_address_and_predicate_formed_at_the_access():
    fn = parse_file(str(LOOP)).functions[0]
    r = recompute_function(fn)
    assert r is not None
    text = render(r.function)
    load = text.index("ld.global.f32 %f2, [%rd4$rc0];")
    assert text[load - 1] == "add.s64 %rd4$rc0, %rd2, %rd3;"
    store = text.index("@%p1$rc0 st.global.u64 [%rd2], %rd3;")
    assert text[store - 1] == "setp.lt.u32 %p1$rc0, %r2, %r1;"
    # the originals are gone, everything else stays
    assert "add.s64 %rd4, %rd2, %rd3;" not in text and "setp.lt.u32 %p1, %r2, %r1;" not in text
    assert len(text) == len(render(fn))
    before, after = pressure_of(fn), pressure_of(r.function)
    assert (before.max_live, before.max_preds) == (11, 2)
    assert (after.max_live, after.max_preds) == (10, 1)
    assert r.report() == {"values": 2, "inserted": 2, "max_live_before": 11,
                          "max_live_after": 10}
    check_recomputation(fn, r.function)


def test_nothing_recomputed_where_an_operand_changes_or_the_definition_does_not_reach():
    fn = parse_file(str(PATHS)).functions[0]
    # %rd4 (its operand %rd3 is redefined on one path) and %rd5 (defined on one path only)
    assert plan(fn) == ([], [])
    assert recompute_function(fn) is None


def _rewrite(fn, define: str, use: str):
    d, u = index_of(fn, define), index_of(fn, use)
    return apply_recomputations(fn, [Recompute(d, (u,))], [d])


def test_validator_refuses_an_operand_redefined_on_one_path():
    fn = parse_file(str(PATHS)).functions[0]
    bad = _rewrite(fn, "add.s64 %rd4, %rd2, %rd3;", "ld.global.f32 %f1, [%rd4];")
    with pytest.raises(VerificationError, match=r"reads %rd4\$rc0 in place of %rd4.*redefined"):
        check_recomputation(fn, bad)


def test_validator_refuses_a_definition_that_does_not_reach():
    fn = parse_file(str(PATHS)).functions[0]
    d = index_of(fn, "add.s64 %rd5, %rd2, %rd3;")
    u = index_of(fn, "ld.global.f32 %f2, [%rd5];")
    # the definition kept: the recomputation alone is refused (not on every path)
    bad = apply_recomputations(fn, [Recompute(d, (u,))], [])
    with pytest.raises(VerificationError, match=r"does not reach"):
        check_recomputation(fn, bad)


def test_validator_refuses_removing_a_live_or_impure_instruction():
    fn = parse_file(str(LOOP)).functions[0]
    add = index_of(fn, "add.s64 %rd4, %rd2, %rd3;")
    with pytest.raises(VerificationError, match="not a dead pure instruction"):
        check_recomputation(fn, apply_recomputations(fn, [], [add]))
    load = index_of(fn, "ld.global.f32 %f2, [%rd4];")
    with pytest.raises(VerificationError, match="not a dead pure instruction"):
        check_recomputation(fn, apply_recomputations(fn, [], [load]))


def test_validator_refuses_a_recomputed_load():
    fn = parse_file(str(LOOP)).functions[0]
    load = index_of(fn, "ld.global.f32 %f2, [%rd4];")
    use = index_of(fn, "add.f32 %f1, %f1, %f2;")
    with pytest.raises(VerificationError, match="pure, unguarded"):
        check_recomputation(fn, apply_recomputations(fn, [Recompute(load, (use,))], []))


def test_validator_accepts_the_pass_and_refuses_a_tampered_record(tmp_path, capsys):
    # the recomputation's records alone (the schedule after it: test_recompute_then_schedule_...)
    res = allocate(LOOP.read_text(), 255, knobs={"schedule": 0}, filename=str(LOOP))
    f = res.functions[0]
    assert f.verified and f.extra["recompute"]["values"] == 2
    assert re.search(r"//@ptxalloc .* recompute=1\n\t//@recompute 5>9 6>11\n\t//@dead 5 6\n",
                     res.ptx)
    good = tmp_path / "good.ptx"
    good.write_text(res.ptx)
    assert main(["verify", str(LOOP), str(good)]) == 0
    assert "verified:" in capsys.readouterr().out
    # a record naming a use that does not read the value
    bad = tmp_path / "bad.ptx"
    bad.write_text(res.ptx.replace("//@recompute 5>9 6>11", "//@recompute 5>10 6>11"))
    assert main(["verify", str(LOOP), str(bad)]) == 1
    assert "does not read %rd4" in capsys.readouterr().err
    # the records without the header flag: unknown annotations
    bad.write_text(res.ptx.replace(" recompute=1", ""))
    assert main(["verify", str(LOOP), str(bad)]) == 1
    assert "unknown annotation" in capsys.readouterr().err


def _chain_fn(name: str):
    return next(f for f in parse_file(str(CHAIN)).functions if f.name == name)


@pytest.mark.parametrize("name", ["chain", "narrow"])
def test_an_address_is_formed_at_the_access_with_the_offset_it_reads(name):
    fn = _chain_fn(name)
    mul, add = index_of(fn, "mul.wide.s32 %rd2, %r2, 4;"), index_of(fn, "add.s64 %rd3, %rd1, %rd2;")
    load = index_of(fn, "ld.global.f32 %f2, [%rd3];")
    # one record: the offset's definition copied first, then the address's, both left out
    assert plan(fn) == ([Recompute(add, (load,), (mul,))], [add, mul])
    r = recompute_function(fn)
    assert r is not None and r.report()["inserted"] == 2 and r.report()["values"] == 2
    text = render(r.function)
    at = text.index("ld.global.f32 %f2, [%rd3$rc0];")
    assert text[at - 2:at] == ["mul.wide.s32 %rd2$rc0, %r2, 4;", "add.s64 %rd3$rc0, %rd1, %rd2$rc0;"]
    assert not any(t.startswith(("mul.wide.s32 %rd2,", "add.s64 %rd3,")) for t in text)
    assert r.max_live_after[0] <= r.max_live_before[0]
    if name == "chain":     # %r2 and %rd1 were live in the loop anyway: two registers fewer
        assert (r.max_live_before[0], r.max_live_after[0]) == (9, 8)
    check_recomputation(fn, r.function)


def test_no_chain_where_the_index_changes_in_the_loop():
    fn = _chain_fn("moved")
    assert plan(fn) == ([], [])


def test_validator_refuses_a_chain_whose_index_changes_in_the_loop():
    fn = _chain_fn("moved")
    mul, add = index_of(fn, "mul.wide.s32 %rd2, %r2, 4;"), index_of(fn, "add.s64 %rd3, %rd1, %rd2;")
    load = index_of(fn, "ld.global.f32 %f2, [%rd3];")
    bad = apply_recomputations(fn, [Recompute(add, (load,), (mul,))], [add, mul])
    with pytest.raises(VerificationError, match=r"reads %rd3\$rc0 in place of %rd3"):
        check_recomputation(fn, bad)


def test_validator_refuses_a_chain_that_copies_another_definition():
    fn = _chain_fn("chain")
    mul, add = index_of(fn, "mul.wide.s32 %rd2, %r2, 4;"), index_of(fn, "add.s64 %rd3, %rd1, %rd2;")
    load = index_of(fn, "ld.global.f32 %f2, [%rd3];")
    # the chain copies %tid.x instead of the offset: the address's copy still reads %rd2,
    # whose definition the record leaves out
    tid = index_of(fn, "mov.u32 %r2, %tid.x;")
    bad = apply_recomputations(fn, [Recompute(add, (load,), (tid,))], [add, mul])
    with pytest.raises(VerificationError, match="not a dead pure instruction"):
        check_recomputation(fn, bad)
    # the right chain is accepted
    check_recomputation(fn, apply_recomputations(fn, [Recompute(add, (load,), (mul,))],
                                                 [add, mul]))


def test_a_chain_record_round_trips_and_a_truncated_one_is_refused(tmp_path, capsys):
    res = allocate(CHAIN.read_text(), 255, filename=str(CHAIN))
    assert {f.verified for f in res.functions} == {True}
    assert re.search(r"//@recompute 3\+4>7\n\t//@dead 3 4\n", res.ptx)
    good = tmp_path / "good.ptx"
    good.write_text(res.ptx)
    assert main(["verify", str(CHAIN), str(good)]) == 0
    capsys.readouterr()
    # without its inner definition the address's copy reads %rd2, whose definition is dead
    bad = tmp_path / "bad.ptx"
    bad.write_text(res.ptx.replace("//@recompute 3+4>7", "//@recompute 4>7", 1))
    assert main(["verify", str(CHAIN), str(bad)]) == 1
    assert "not a dead pure instruction" in capsys.readouterr().err


def test_knob_switches_it_off():
    res = allocate(LOOP.read_text(), 255, knobs={"recompute": 0}, filename=str(LOOP))
    assert "recompute=" not in res.ptx and "//@recompute" not in res.ptx
    assert "recompute" not in res.functions[0].extra


def test_recompute_then_schedule_is_proven(tmp_path):
    text = LOOP.read_text()
    res = allocate(text, 16, knobs={"schedule": 1}, filename=str(LOOP))
    assert "recompute=1" in res.ptx
    verify_modules(parse(text, str(LOOP)), parse_allocated(res.ptx, "alloc.ptx"))


def test_a_budget_the_recomputation_overfills_falls_back_to_the_code_as_written():
    """A constant recomputed at a use beside the other members of its ``st.v4`` tuple: the
    ``mul.wide`` then needs the whole quad, its guarded 64-bit result and the recomputed copy,
    7 registers at once (found by hypothesis in test_fuzz_alloc). At K = 6 the code as written
    fits: it is allocated without the pre-passes, the report says why, the checker proves it."""
    path = DATA / "hand" / "recompute_beside_tuple.ptx"
    text = path.read_text()
    res = allocate(text, 6, filename=str(path))
    (fr,) = res.functions
    assert "needs 7 registers at once" in fr.extra["pre_passes_left_out"]
    assert any(n.startswith("pre-passes left out") for n in fr.notes)
    assert "recompute" not in fr.extra and "//@recompute" not in res.ptx
    assert fr.verified is True
    verify_modules(parse(text, str(path)), parse_allocated(res.ptx, "alloc.ptx"))
    # with the budget that fits the recomputed code, the pre-passes stay
    assert "pre_passes_left_out" not in allocate(text, 7, filename=str(path)).functions[0].extra


def test_triton_matmul_maxlive_falls():
    fn = parse_file(str(TRITON / "sm80_matmul.ptx")).functions[0]
    r = recompute_function(fn)
    assert r is not None
    check_recomputation(fn, r.function)
    assert r.max_live_before[0] == 213 and r.max_live_after[0] <= 180


@pytest.mark.ptxas
@pytest.mark.parametrize("path", [LOOP, CHAIN, TRITON / "sm80_matmul.ptx", TRITON / "sm80_softmax.ptx",
                                  TRITON / "sm80_layer_norm.ptx",
                                  TRITON / "attn_fwd_tma_64x64_d64.ptx"], ids=lambda p: p.name)
@pytest.mark.parametrize("allocator,k", [("briggs", 128), ("fatpoint", 255)])
def test_recomputed_allocations_are_proven_and_assemble(path, allocator, k):
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    text = path.read_text()
    res = allocate(text, k, allocator, filename=str(path))
    assert {f.verified for f in res.functions} == {True}
    assert any("recompute" in f.extra for f in res.functions)
    verify_modules(parse(text, str(path)), parse_allocated(res.ptx, "alloc.ptx"))
    arch = parse(text, str(path)).sm or "sm_80"
    out = ptxas.assemble(res.ptx, "sm_90a" if arch.startswith("sm_90") else arch)
    assert out.ok, out.output


def test_an_old_abi_result_is_never_dead():
    """``.func (.reg .u32 %ret)``: the caller reads %ret at ``ret``, no instruction does."""
    fn = parse_file(str(DATA / "hand" / "old_abi_call.ptx")).functions[0]
    d = index_of(fn, "add.u32 %ret, %t, %a;")
    with pytest.raises(VerificationError, match="not a dead pure instruction"):
        check_recomputation(fn, apply_recomputations(fn, [], [d]))
    assert all(r.define != d for r in plan(fn)[0])


# a value read from a wgmma A fragment before the wgmma issues, used before its wait
WGMMA_FRAGMENT = """.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(.param .u64 pa, .param .u64 pb)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<24>;
	.reg .f32 	%f<20>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [pa];
	ld.param.u64 	%rd2, [pb];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.f32 	%f0, 0f00000000;
	mov.f32 	%f1, 0f00000000;
	mov.f32 	%f2, 0f00000000;
	mov.f32 	%f3, 0f00000000;
	ld.global.b32 	%r0, [%rd1+0];
	ld.global.b32 	%r1, [%rd1+4];
	ld.global.b32 	%r2, [%rd1+8];
	ld.global.b32 	%r3, [%rd1+12];
	add.u32 	%r20, %r0, 7;
	setp.ne.u64 	%p1, %rd2, 0;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, %rd2, %p1, 1, 1, 0;
	wgmma.commit_group.sync.aligned;
	st.global.u32 	[%rd1+64], %r20;
	wgmma.wait_group.sync.aligned 0;
	st.global.f32 	[%rd1], %f0;
	st.global.f32 	[%rd1+4], %f1;
	st.global.f32 	[%rd1+8], %f2;
	st.global.f32 	[%rd1+12], %f3;
	ret;
}
"""


def test_no_recomputation_reads_a_register_in_flight():
    """'add.u32 %r20, %r0, 7' reads %r0, an A fragment the wgmma then keeps reading until its
    wait: recomputed at the store before the wait, the copy would read %r0 in flight
    (undefined). Before the fix the validator accepted that record."""
    from ptxalloc.ptx import parse
    fn = parse(WGMMA_FRAGMENT, "fragment.ptx").functions[0]
    ins = fn.instructions()
    d = next(i for i, x in enumerate(ins) if x.opcode == "add.u32")
    u = next(i for i, x in enumerate(ins) if x.opcode == "st.global.u32")
    records, dead = plan(fn)
    assert d not in dead and all(r.define != d for r in records)
    bad = apply_recomputations(fn, [Recompute(d, (u,))], [d])
    with pytest.raises(VerificationError, match="asynchronous instruction"):
        check_recomputation(fn, bad)


# movmatrix (.aligned: the whole warp executes it together) and a use under a divergent branch
MOVMATRIX = """.version 8.0
.target sm_80
.address_size 64

.visible .entry k(.param .u64 pa)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<24>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [pa];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r1, %tid.x;
	ld.global.b32 	%r4, [%rd1];
	movmatrix.sync.aligned.m8n8.trans.b16 	%r5, %r4;
	setp.lt.u32 	%p1, %r1, 7;
	@%p1 bra 	SKIP;
	st.global.u32 	[%rd1+64], %r5;
SKIP:
	ret;
}
"""


def test_a_warp_synchronous_instruction_is_not_recomputed_under_a_branch():
    """Before the fix the validator accepted 'movmatrix.sync.aligned' copied to a use under a
    divergent branch, where only some threads of the warp would execute it (undefined)."""
    from ptxalloc.ptx import parse
    fn = parse(MOVMATRIX, "movmatrix.ptx").functions[0]
    ins = fn.instructions()
    d = next(i for i, x in enumerate(ins) if x.opcode.startswith("movmatrix"))
    u = next(i for i, x in enumerate(ins) if x.opcode == "st.global.u32")
    bad = apply_recomputations(fn, [Recompute(d, (u,))], [d])
    with pytest.raises(VerificationError, match="not warp-synchronous"):
        check_recomputation(fn, bad)


# -- predicates beyond P0-P6: recomputed at the guarded access, their operands' ranges extended -

def test_predicates_beyond_the_file_are_recomputed_at_their_guarded_accesses(tmp_path):
    fn = parse_file(str(PREDICATES)).functions[0]
    setps = [i for i, t in enumerate(render(fn)) if t.startswith("setp")]
    # the indices are read by nothing but the setps and are dead at the stores: without the
    # trade no predicate qualifies
    records, _ = plan(fn, trade_predicates=False)
    assert not {r.define for r in records} & set(setps)
    r = recompute_function(fn)
    assert r is not None and {x.define for x in r.records} == set(setps)
    assert r.max_live_before == (19, 9) and r.max_live_after == (19, 1)
    check_recomputation(fn, r.function)
    text = render(r.function)
    for k in range(1, 10):          # each store right after the setp that guards it
        store = next(i for i, t in enumerate(text) if t.startswith("@%p") and
                     t.endswith(f"[%rd1+{128 + 4 * k}], %r1;"))
        assert text[store - 1].startswith("setp.lt.s32") and f"%r{k + 20}, %r1;" in \
            text[store - 1], text[store - 1]
    # the whole chain: no predicate spilled (without chains, no trade: three are), proven
    # from the files, assembled
    res = allocate(PREDICATES.read_text(), 255, filename=str(PREDICATES))
    f = res.functions[0]
    assert f.verified and f.predicates <= 7 and "//@pspill" not in res.ptx
    assert f.registers == f.max_live_legalized == 19
    plain = allocate(PREDICATES.read_text(), 255, knobs={"recompute": 1},
                     filename=str(PREDICATES))
    assert "//@pspill" in plain.ptx and plain.functions[0].registers == 19
    out = tmp_path / "out.ptx"
    out.write_text(res.ptx)
    assert main(["verify", str(PREDICATES), str(out)]) == 0
    if ptxas.available():
        got = ptxas.assemble(res.ptx, "sm_80")
        assert got.ok, got.output


def test_the_validator_refuses_a_predicate_whose_operand_changed_before_the_access():
    """The trade's records applied to a program where an index is redefined between its setp
    and the guarded store: the copy would read the new index, and the validator says so."""
    text = PREDICATES.read_text()
    r = recompute_function(parse(text, str(PREDICATES)).functions[0])
    changed = parse(text.replace("\tbar.sync \t0;", "\tadd.s32 \t%r21, %r21, 1;\n\tbar.sync \t0;"),
                    str(PREDICATES)).functions[0]
    at = index_of(changed, "add.s32 %r21, %r21, 1;")
    shifted = [Recompute(x.define, tuple(u + (u >= at) for u in x.uses), x.inner)
               for x in r.records]
    with pytest.raises(VerificationError, match=r"reads %p1\$rc0 in place of %p1, but the two do "
                                                 r"not hold the same computation"):
        check_recomputation(changed, apply_recomputations(changed, shifted, r.dead))
    # and the pass itself leaves that predicate where it is
    again = recompute_function(changed)
    p1 = index_of(changed, "setp.lt.s32 %p1, %r21, %r1;")
    assert again is not None and p1 not in {x.define for x in again.records}
    check_recomputation(changed, again.function)


def test_no_trade_is_planned_while_the_predicates_fit_or_when_it_changes_nothing():
    fn = parse_file(str(LOOP)).functions[0]
    assert pressure_of(fn).max_preds <= 7
    assert len(recompute_choices(fn)) == 1
    # Triton's layer-norm keeps 9 predicates live; the plain plan already recomputes them
    fn = parse_file(str(TRITON / "sm80_layer_norm.ptx")).functions[0]
    assert pressure_of(fn).max_preds > 7
    (only,) = recompute_choices(fn)
    assert only.max_live_after[1] <= 7


def test_triton_matmul_predicates_fit_the_file():
    """Triton's matmul keeps 34 predicates live (setp and and.pred before the epilogue's
    barrier, read as guards of its stores); ptxas never more than 7."""
    fn = parse_file(str(TRITON / "sm80_matmul.ptx")).functions[0]
    r = recompute_function(fn)
    assert r.max_live_before == (213, 34)
    assert r.max_live_after[1] <= 7 and r.max_live_after[0] <= 145
    check_recomputation(fn, r.function)


EPILOGUE = DATA / "hand" / "recompute_epilogue.ptx"


def _epilogue_fn(name: str):
    return next(f for f in parse_file(str(EPILOGUE)).functions if f.name == name)


def test_an_epilogue_address_is_formed_at_each_store_through_a_chain_of_four(monkeypatch):
    """Triton's epilogue shape: the 64-bit offsets held across the loop and the addresses
    made before the barrier are formed at each store instead, from the 32-bit indices (whose
    ranges, shared with their readers before the loop, take the offsets' place) and the base:
    chains of four, which the former bound of three left live across the loop and the
    barrier."""
    import ptxalloc.passes.recompute as pass_module
    fn = _epilogue_fn("epilogue")
    second = [index_of(fn, "cvt.s64.s32 %rd3, %r4;"), index_of(fn, "shl.b64 %rd7, %rd3, 2;"),
              index_of(fn, "add.s64 %rd8, %rd1, %rd7;"), index_of(fn, "add.s64 %rd9, %rd8, 64;")]
    first = [index_of(fn, "cvt.s64.s32 %rd2, %r3;"), index_of(fn, "shl.b64 %rd4, %rd2, 2;"),
             index_of(fn, "add.s64 %rd5, %rd1, %rd4;"), index_of(fn, "add.s64 %rd6, %rd5, 64;")]
    stores = [index_of(fn, "st.global.f32 [%rd6], %f1;"), index_of(fn, "st.global.f32 [%rd9], %f2;")]
    records, dead = plan(fn)
    assert records == [Recompute(first[3], (stores[0],), tuple(first[:3])),
                        Recompute(second[3], (stores[1],), tuple(second[:3]))]
    assert sorted(dead) == sorted(first + second)
    r = recompute_function(fn)
    assert r is not None
    text = render(r.function)
    at = text.index("st.global.f32 [%rd6$rc0], %f1;")
    assert text[at - 4:at] == ["cvt.s64.s32 %rd2$rc0, %r3;", "shl.b64 %rd4$rc0, %rd2$rc0, 2;",
                               "add.s64 %rd5$rc0, %rd1, %rd4$rc0;",
                               "add.s64 %rd6$rc0, %rd5$rc0, 64;"]
    assert text.index("bar.sync 0;") < at - 4
    # two 64-bit offsets across the loop become the two 32-bit indices
    assert (r.max_live_before, r.max_live_after) == ((11, 1), (9, 1))
    check_recomputation(fn, r.function)
    # with chains of three nothing is formed at the stores: the addresses stay live across
    # the barrier
    monkeypatch.setattr(pass_module, "MAX_CHAIN", 3)
    assert not any(set(rec.uses) & set(stores) for rec in plan(fn)[0])


def test_no_epilogue_chain_where_the_index_changes_before_the_store():
    fn = _epilogue_fn("moved")
    store = index_of(fn, "st.global.f32 [%rd6], %f1;")
    assert not any(store in rec.uses for rec in plan(fn)[0])


def test_validator_refuses_a_chain_of_four_whose_index_changes_before_the_store():
    fn = _epilogue_fn("moved")
    chain = [index_of(fn, "cvt.s64.s32 %rd2, %r3;"), index_of(fn, "shl.b64 %rd4, %rd2, 2;"),
             index_of(fn, "add.s64 %rd5, %rd1, %rd4;")]
    address = index_of(fn, "add.s64 %rd6, %rd5, 64;")
    store = index_of(fn, "st.global.f32 [%rd6], %f1;")
    bad = apply_recomputations(fn, [Recompute(address, (store,), tuple(chain))], chain + [address])
    with pytest.raises(VerificationError, match=r"reads %rd6\$rc0 in place of %rd6"):
        check_recomputation(fn, bad)


def test_validator_refuses_a_chain_of_four_missing_a_link_or_with_a_changed_constant():
    fn = _epilogue_fn("epilogue")
    cvt, shl, based, address = (index_of(fn, "cvt.s64.s32 %rd2, %r3;"),
                                index_of(fn, "shl.b64 %rd4, %rd2, 2;"),
                                index_of(fn, "add.s64 %rd5, %rd1, %rd4;"),
                                index_of(fn, "add.s64 %rd6, %rd5, 64;"))
    store = index_of(fn, "st.global.f32 [%rd6], %f1;")
    good = apply_recomputations(fn, [Recompute(address, (store,), (cvt, shl, based))],
                                [cvt, shl, based, address])
    check_recomputation(fn, good)
    # the shift's copy left out: the base add's copy reads %rd4, whose definition is dead
    bad = apply_recomputations(fn, [Recompute(address, (store,), (cvt, based))],
                               [cvt, shl, based, address])
    with pytest.raises(VerificationError, match="not a dead pure instruction"):
        check_recomputation(fn, bad)
    # the inserted shift by 3 instead of 2: the address read at the store is another value
    for k, s in enumerate(good.body):
        if getattr(s, "opcode", "") == "shl.b64" and s.defs[0] >= len(fn.regs):
            good.body[k] = s.copy_with([s.ops[0], s.ops[1], Imm("3")])
            break
    else:
        raise AssertionError("no inserted shift")
    with pytest.raises(VerificationError, match=r"reads %rd6\$rc0 in place of %rd6"):
        check_recomputation(fn, good)


@pytest.mark.ptxas
@pytest.mark.parametrize("allocator,k", [("briggs", 8), ("fatpoint", 8), ("briggs", 255)])
def test_the_epilogue_chain_is_proven_from_the_original_and_assembles(tmp_path, capsys,
                                                                      allocator, k):
    text = EPILOGUE.read_text()
    res = allocate(text, k, allocator, filename=str(EPILOGUE))
    assert {f.verified for f in res.functions} == {True}
    assert re.search(r"//@recompute 4\+\d+\+\d+\+\d+>\d+ 5\+\d+\+\d+\+\d+>\d+", res.ptx)
    verify_modules(parse(text, str(EPILOGUE)), parse_allocated(res.ptx, "alloc.ptx"))
    out = tmp_path / "epilogue.allocated.ptx"
    out.write_text(res.ptx)
    assert main(["verify", str(EPILOGUE), str(out)]) == 0
    if ptxas.available():
        got = ptxas.assemble(res.ptx, "sm_80")
        assert got.ok, got.output


@pytest.mark.parametrize("path", sorted(TRITON.glob("*.ptx")) + [DATA / "loops_sm80.ptx", EPILOGUE],
                         ids=lambda p: p.name)
def test_a_plan_that_took_no_new_step_is_the_unshared_plan(path):
    """``novel`` is what lets recompute_choices skip the plan without shared extensions: a
    plan that took no step that one would not (no shared operand extended, no chain deeper
    than three, no extension chosen over a chain) is that plan, record for record."""
    from ptxalloc.passes.recompute import _plan
    for fn in parse_file(str(path)).functions:
        for trade in (False, True):
            made = _plan(fn, True, trade, share=True)
            if not made.novel:
                alone = _plan(fn, True, trade, share=False)
                assert (alone.records, sorted(alone.dead)) == (made.records, sorted(made.dead))


def _apart_peaks() -> str:
    """Twelve 32-bit values live at once, summed; then nine predicates live at once beside
    the sum and the address only: the general peak and the predicate peak at different
    points."""
    body = ["\tld.param.u64 \t%rd1, [apart_param_0];"]
    body += [f"\tld.global.u32 \t%r{i}, [%rd1+{4 * i}];" for i in range(1, 13)]
    body += ["\tadd.u32 \t%r13, %r1, %r2;"]
    body += [f"\tadd.u32 \t%r13, %r13, %r{i};" for i in range(3, 13)]
    body += [f"\tsetp.ne.u32 \t%p{i}, %r13, {i};" for i in range(1, 10)]
    body += [f"\t@%p{i} st.global.u32 \t[%rd1+{4 * i}], %r13;" for i in range(1, 10)]
    return (".version 7.0\n.target sm_80\n.address_size 64\n\n"
            ".visible .entry apart(.param .u64 apart_param_0)\n{\n"
            "\t.reg .pred \t%p<10>;\n\t.reg .b32 \t%r<14>;\n\t.reg .b64 \t%rd<2>;\n"
            + "\n".join(body) + "\n\tret;\n}\n")


def test_the_choice_weighs_every_predicate_beyond_the_file_and_the_floor_only_where_live():
    """Two measures of the predicates beyond P0-P6, each for its own use: the floor
    (Pressure.max_live_with_predicates: general registers and predicates above seven at one
    point) is 14 here, the twelve loads and the address, the nine predicates living beside
    three general registers only; what the recomputation choices weigh (registers_needed: the
    general peak plus the predicate peak's excess) is 16, every predicate beyond the file
    counted, since each costs save and restore code wherever it lives."""
    from ptxalloc.passes.recompute import registers_needed
    fn = parse(_apart_peaks()).functions[0]
    p = pressure_of(fn)
    assert (p.max_live, p.max_preds) == (14, 9)
    assert p.max_live_with_predicates(7) == 14
    assert registers_needed((p.max_live, p.max_preds)) == 16


def test_an_unshared_plan_of_the_same_records_is_not_measured_again(monkeypatch):
    """hand/scopes.ptx: the plan with shared extensions takes a step the plan without them
    would not, yet both plan the same records; the second is then not applied and measured
    (the same records make the same function), and the choice is the first plan's, which
    needs as many registers as applying the second gives."""
    import ptxalloc.analysis as analysis_module
    import ptxalloc.passes.recompute as recompute_module
    from ptxalloc.passes.recompute import registers_needed
    fn = parse_file(str(DATA / "hand" / "scopes.ptx")).functions[0]
    plans = []
    real_plan = recompute_module._plan
    monkeypatch.setattr(recompute_module, "_plan",
                        lambda *a, **k: plans.append(real_plan(*a, **k)) or plans[-1])
    measured = []
    real_pressure = analysis_module.pressure_of
    monkeypatch.setattr(analysis_module, "pressure_of",
                        lambda f, *a: measured.append(f) or real_pressure(f, *a))
    choices = recompute_choices(fn)
    shared, unshared = plans
    assert shared.novel and unshared.records and not unshared.novel
    assert (unshared.records, unshared.dead) == (shared.records, shared.dead)
    assert len(measured) == 1 and choices[0].records == shared.records
    again = real_pressure(apply_recomputations(fn, unshared.records, unshared.dead))
    assert registers_needed((again.max_live, again.max_preds)) == \
        registers_needed(choices[0].max_live_after)
