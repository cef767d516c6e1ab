"""Loop-invariant hoisting before allocation (issue 17, seed 004 HoistInvariants): what the pass
moves on hand-written PTX (the invariants only: not a loop-variant, guarded, memory or
live-into-the-header instruction), its translation validator refusing every wrong ``//@hoist``
line, and the whole chain — hoist, allocate, ``verify ORIGINAL ALLOCATED`` — proven and
assembled."""

from __future__ import annotations

import re

import pytest

from conftest import DATA
from ptxalloc import ptxas
from ptxalloc.cli import main
from ptxalloc.errors import VerificationError
from ptxalloc.passes.hoist import hoist_function
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse, parse_file
from ptxalloc.verify import parse_allocated, verify_modules
from ptxalloc.verify.hoist import hoisted_original

LOOP = DATA / "hand" / "hoist_loop.ptx"


def render(fn) -> list[str]:
    return [i.render(fn.regs.names.__getitem__) for i in fn.instructions()]


def test_only_the_invariants_move_to_the_preheader():
    fn = parse_file(str(LOOP)).functions[0]
    h = hoist_function(fn)
    assert h is not None
    # instruction 8 is the preheader's 'bra.uni'; 10 and 11 compute n * 3 and n * 3 + 7
    assert h.groups == [(8, "<", [10, 11])]
    assert h.report() == {"hoisted": 2, "loops": 1, "loops_without_preheader": 0}
    text = render(h.function)
    assert text[8:11] == ["mul.lo.s32\t%r5, %r2, 3;", "add.s32\t%r6, %r5, 7;",
                          "bra.uni\t$L__loop;"]
    # the loop-variant add, the guarded movs, the load and %r7 (live into the header) stay
    for kept in ("add.s32\t%r8, %r1, %r6;", "@%p1 mov.u32\t%r9, 4;",
                 "ld.global.u32\t%r4, [%rd4];", "mul.lo.s32\t%r7, %r2, 5;"):
        assert text.index(kept) > text.index("bra.uni\t$L__loop;")
    assert sorted(text) == sorted(render(fn))


def test_no_loop_nothing_to_do():
    fn = parse_file(str(DATA / "hand" / "sched_loads.ptx")).functions[0]
    assert hoist_function(fn) is None


def _allocated(tmp_path, knobs=None):
    res = allocate(LOOP.read_text(), 255, knobs=knobs or {"hoist": 1}, filename=str(LOOP))
    out = tmp_path / "out.ptx"
    out.write_text(res.ptx)
    return res, out


def test_the_whole_chain_is_proven_and_assembles(tmp_path, capsys):
    res, out = _allocated(tmp_path)
    f = res.functions[0]
    assert f.verified and f.extra["hoist"]["hoisted"] == 2
    assert re.search(r"//@ptxalloc .* hoist=1\b.*\n(\t//@.*\n)*\t//@hoist 8< 10 11\n", res.ptx)
    assert main(["verify", str(LOOP), str(out)]) == 0
    assert "verified:" in capsys.readouterr().out
    if ptxas.available():
        assert ptxas.assemble(res.ptx, "sm_80").ok
    # the CLI switch, with the other pre-passes in the same chain
    out2 = tmp_path / "cli.ptx"
    assert main(["allocate", str(LOOP), "--knob", "hoist=1", "--knob", "schedule=1",
                 "--knob", "promote=1", "-o", str(out2)]) == 0
    assert "hoist=1" in out2.read_text()
    assert main(["verify", str(LOOP), str(out2)]) == 0


def test_off_by_default():
    res = allocate(LOOP.read_text(), 255, filename=str(LOOP))
    assert "hoist=" not in res.ptx and "//@hoist" not in res.ptx


def _check(line: str):
    """The validator's verdict on one ``//@hoist`` line for the hand-written loop."""
    original = parse_file(str(LOOP)).functions[0]
    fake = original.copy()
    from ptxalloc.ir.instruction import COMMENT, Raw
    fake.body = [Raw(COMMENT, line)] + fake.body
    return hoisted_original(original, fake)


@pytest.mark.parametrize("line,why", [
    ("//@hoist 8< 12", "loop-variant"),                   # reads %r1, the induction variable
    ("//@hoist 8< 11", "loop-variant"),                   # reads %r5 before its hoisting
    ("//@hoist 8< 11 10", "loop-variant"),                # in the wrong order
    ("//@hoist 8< 14", "not speculatable"),               # guarded
    ("//@hoist 8< 18", "not speculatable"),               # a load
    ("//@hoist 8< 21", "live into the loop header"),      # %r7
    ("//@hoist 8< 20", "definitions"),                    # %r3 has three
    ("//@hoist 7< 10", "one loop header alone"),           # ends a block with two exits
    ("//@hoist 8> 10", "before the block's branch"),      # after the branch
    ("//@hoist 24< 10", "not the last instruction"),      # inside the loop
    ("//@hoist 26< 10", "not the last instruction"),      # after the loop
    ("//@hoist 8< 3", "not in the loop"),
    ("//@hoist 8< 10 10", "listed twice"),
    ("//@hoist 8< 99", "outside the original"),
    ("//@hoist 8 10", "malformed"),
])
def test_the_validator_refuses_wrong_hoists(line, why):
    with pytest.raises(VerificationError, match=why):
        _check(line)


def test_the_validator_accepts_what_the_pass_did():
    original = parse_file(str(LOOP)).functions[0]
    h = hoist_function(original)
    replayed = _check("//@hoist 8< 10 11")
    assert render(replayed) == render(h.function)


def test_a_tampered_allocation_is_refuted(tmp_path, capsys):
    # recomputation without chains: with them, its records of the hoisted order are refused
    # first when the header loses hoist=1
    res, out = _allocated(tmp_path, {"hoist": 1, "recompute": 1})
    # claim the loop-variant add was hoisted too
    out.write_text(res.ptx.replace("//@hoist 8< 10 11", "//@hoist 8< 10 11 12"))
    assert main(["verify", str(LOOP), str(out)]) == 1
    assert "loop-variant" in capsys.readouterr().err
    # a hoist line without hoist=1 in the header is an unknown annotation
    out.write_text(res.ptx.replace(" hoist=1", ""))
    assert main(["verify", str(LOOP), str(out)]) == 1
    assert "unknown annotation" in capsys.readouterr().err
    # the header claims no hoisting, yet the allocation is of the hoisted order
    original, allocated = parse(LOOP.read_text(), str(LOOP)), parse_allocated(
        res.ptx.replace(" hoist=1", "").replace("\t//@hoist 8< 10 11\n", ""), "x.ptx")
    with pytest.raises(VerificationError):
        verify_modules(original, allocated)


def test_a_header_that_drops_a_pass_is_refused_for_the_records_of_that_pass(tmp_path, capsys):
    """With recomputation's chains on (the default), the recompute records index the hoisted
    order: the hoist records a header no longer names are refused first, as unknown
    annotations, rather than the recompute records for a reason that is not the cause (found
    in review)."""
    res, out = _allocated(tmp_path, {"hoist": 1})
    assert "//@recompute" in res.ptx
    out.write_text(res.ptx.replace(" hoist=1", ""))
    assert main(["verify", str(LOOP), str(out)]) == 1
    err = capsys.readouterr().err
    assert "unknown annotation '//@hoist" in err and "header does not name its pass" in err


def test_verbose_says_what_was_hoisted(tmp_path, capsys):
    assert main(["allocate", str(LOOP), "--knob", "hoist=1", "-v",
                 "-o", str(tmp_path / "o.ptx")]) == 0
    got = capsys.readouterr()
    assert "hoisted 2 loop-invariant instructions out of 1 loops" in got.out + got.err


def test_nested_loops_and_the_innermost_policy(tmp_path):
    """nvcc's triple loop (tests/data/loops.cu): the invariants leave the outer loops; with
    hoist=2 (innermost loops only, ptxas's 'inner loops' policy) nothing moves there. Both
    proven through the chain and assembled."""
    path = DATA / "loops_sm80.ptx"
    fn = next(f for f in parse_file(str(path)).functions if f.name == "_Z7k_nest3PfPKfiii")
    h = hoist_function(fn)
    assert h.report()["hoisted"] == 9 and len(h.groups) == 2
    assert hoist_function(fn, innermost_only=True) is None
    for value in (1, 2):
        res = allocate(path.read_text(), 255, knobs={"hoist": value}, filename=str(path))
        assert all(f.verified for f in res.functions)
        out = tmp_path / f"out{value}.ptx"
        out.write_text(res.ptx)
        assert main(["verify", str(path), str(out)]) == 0
        if ptxas.available():
            assert ptxas.assemble(res.ptx, "sm_80").ok
    assert main(["allocate", str(LOOP), "--knob", "hoist=3", "-o", str(out)]) == 2


# a wgmma whose wait is inside the loop: the accumulators are in flight at the preheader
WGMMA_WAIT_IN_LOOP = """.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u32 n)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<20>;
	.reg .f32 	%f<20>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [pa];
	ld.param.u64 	%rd2, [pb];
	ld.param.u32 	%r10, [n];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.f32 	%f0, 0f00000000;
	mov.f32 	%f1, 0f00000000;
	mov.f32 	%f2, 0f00000000;
	mov.f32 	%f3, 0f00000000;
	ld.global.b32 	%r0, [%rd1+0];
	ld.global.b32 	%r1, [%rd1+4];
	ld.global.b32 	%r2, [%rd1+8];
	ld.global.b32 	%r3, [%rd1+12];
	setp.ne.u64 	%p1, %rd2, 0;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, %rd2, %p1, 1, 1, 0;
	wgmma.commit_group.sync.aligned;
	mov.u32 	%r11, 0;
LOOP:
	wgmma.wait_group.sync.aligned 0;
	add.f32 	%f10, %f0, %f1;
	mul.wide.u32 	%rd3, %r11, 4;
	add.s64 	%rd4, %rd1, %rd3;
	st.global.f32 	[%rd4], %f10;
	add.s32 	%r11, %r11, 1;
	setp.lt.u32 	%p2, %r11, %r10;
	@%p2 bra 	LOOP;
	ret;
}
"""


def test_a_read_of_a_register_in_flight_is_not_hoisted_above_its_wait():
    """'add.f32 %f10, %f0, %f1' after the loop's wgmma.wait_group reads the accumulators of a
    wgmma issued before the loop: in the preheader it would read them in flight (undefined,
    PTX ISA 9.7.15.7.3). Before the fix both the pass and the validator took it. The pass now
    leaves it, the validator refuses it."""
    original = parse(WGMMA_WAIT_IN_LOOP, "wgmma_loop.ptx").functions[0]
    k = next(i for i, ins in enumerate(original.instructions()) if ins.opcode == "add.f32")
    anchor = next(i for i, ins in enumerate(original.instructions())
                  if ins.opcode.startswith("mov.u32"))
    got = hoist_function(original)
    assert got is None or all(k not in moved for _, _, moved in got.groups)
    from ptxalloc.ir.instruction import COMMENT, Raw
    fake = original.copy()
    fake.body = [Raw(COMMENT, f"//@hoist {anchor}> {k}")] + fake.body
    with pytest.raises(VerificationError, match="in flight"):
        hoisted_original(original, fake)
