"""Loop-carried pointer families as one induction variable (issue 13): what the pass finds on
hand-written PTX and on Triton's attention backward, that MaxLive after recomputation falls,
its translation validator refusing every wrong ``//@induction`` record (a different stride, a
member written elsewhere in the loop, a read between the advances, a member live out, an entry
that no longer holds, ...), and the whole chain — induction, recompute, allocate, ``verify
ORIGINAL ALLOCATED`` — proven and assembled."""

from __future__ import annotations

import pytest

from conftest import DATA
from ptxalloc import ptxas
from ptxalloc.analysis import pressure_of
from ptxalloc.cli import main
from ptxalloc.errors import VerificationError
from ptxalloc.ir.induction import Family, apply_families, parse_line
from ptxalloc.ir.instruction import COMMENT, Raw
from ptxalloc.passes.induction import induction_function
from ptxalloc.passes.recompute import recompute_function
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse, parse_file
from ptxalloc.verify.induction import check_families, induced_original

LOOP = DATA / "hand" / "induction_loop.ptx"
ATTN_BWD = DATA / "triton" / "attn_bwd_d64.ptx"
RECORD = "//@induction 19> 30,31,32,33 10,12,14,16 20,21,22,23"


def render(fn) -> list[str]:
    return [i.render(fn.regs.names.__getitem__) for i in fn.instructions()]


def recomputed(fn):
    got = recompute_function(fn)
    return got.function if got else fn


def test_the_family_is_found_and_rewritten():
    fn = parse_file(str(LOOP)).functions[0]
    got = induction_function(fn)
    assert [f.line() for f in got.families] == [RECORD]
    text = render(got.function)
    # the counter starts at the base after the preheader's last instruction and advances once
    assert text[text.index("mov.u64\t%rd20, %rd2;") + 1] == "mov.b64\t%rd11$iv0, %rd1;"
    assert text.count("add.s64\t%rd11$iv0, %rd11$iv0, %rd3;") == 1
    # each load reads the counter plus its pointer's offset; no advance of a member is left,
    # and the entry definitions nothing reads any more are gone
    assert "add.s64\t%rd14$iv0, %rd11$iv0, %rd7;" in text
    assert "ld.global.f32\t%f5, [%rd14$iv0+4];" in text
    assert not any(line.startswith(("add.s64\t%rd11,", "add.s64\t%rd12,")) for line in text)
    # %rd20 (another stride, entered by a copy) is no member
    assert "add.s64\t%rd20, %rd20, 8;" in text


def test_maxlive_after_recomputation_falls():
    fn = parse_file(str(LOOP)).functions[0]
    got = induction_function(fn)
    assert pressure_of(recomputed(got.function)).max_live < pressure_of(recomputed(fn)).max_live


def test_the_validator_accepts_what_the_pass_did():
    fn = parse_file(str(LOOP)).functions[0]
    got = induction_function(fn)
    fake = fn.copy()
    fake.body = [Raw(COMMENT, RECORD)] + fake.body
    assert render(induced_original(fn, fake)) == render(got.function)


def _variant(old: str, new: str):
    text = LOOP.read_text()
    assert text.count(old) == 1
    return parse(text.replace(old, new), str(LOOP)).functions[0]


def _read_between_advances():
    """The loop with its fourth load moved between the advances (a read of a half-advanced
    family), the record naming it as one of the reads."""
    text = LOOP.read_text().replace("\tld.global.f32\t%f5, [%rd14+4];\n", "@@LOAD@@")
    text = text.replace("\tadd.s64\t%rd11, %rd11, %rd3;\n", "\tld.global.f32\t%f5, [%rd14+4];\n")
    text = text.replace("@@LOAD@@", "\tadd.s64\t%rd11, %rd11, %rd3;\n")
    return parse(text, str(LOOP)).functions[0]


@pytest.mark.parametrize("variant,line,why", [
    (None, "//@induction 19> 30,31,32,34 10,12,14,16 20,21,22,23", "another stride"),
    (None, "//@induction 19> 30,31,32,33 10,12,14,16 20,21,22", "reads of members"),
    (None, "//@induction 19> 30,31,32,33 10,12,14,16 20,21,22,23,24", "reads of members"),
    (None, "//@induction 19> 30,31,32,33 10,12,14,15 20,21,22,23", "entry is not"),
    (None, "//@induction 19> 30,31,32,33 10,12,16,14 20,21,22,23", "entry is not"),
    (None, "//@induction 19> 30,31,32,33 10,12,14 20,21,22,23", "one entry per advance"),
    (None, "//@induction 18> 30,31,32,33 10,12,14,16 20,21,22,23", "not the last instruction"),
    (None, "//@induction 19< 30,31,32,33 10,12,14,16 20,21,22,23", "before the block's branch"),
    (None, "//@induction 19> 30,31,32,33 10,12,14,16 20,21,22,99", "outside the original"),
    (None, "//@induction 19> 31,30 12,10 21,20", "ascending"),
    (None, "//@induction 19> 30,31,32 10,12", "malformed"),
    # a member written elsewhere in the loop
    (("\tst.global.f32\t[%rd20], %f1;", "\tadd.s64\t%rd12, %rd12, 4;"), RECORD,
     "writes a member in the loop"),
    # the offset or the stride written in the loop
    (("\tst.global.f32\t[%rd20], %f1;", "\tadd.s64\t%rd5, %rd5, 4;"), RECORD,
     "writes the stride or an offset"),
    (("\tst.global.f32\t[%rd20], %f1;", "\tadd.s64\t%rd3, %rd3, 4;"), RECORD,
     "writes the stride or an offset"),
    # a member live out of the loop
    (("\tst.global.f32\t[%rd2], %f1;", "\tst.global.f32\t[%rd11], %f1;"), RECORD,
     "live out of the loop"),
    # the base redefined after the entries: they no longer hold at the loop's entry
    (("\tmov.f32\t%f1, 0f00000000;", "\tmov.u64\t%rd1, 0;"), RECORD,
     "does not hold at the end of the preheader"),
])
def test_the_validator_refuses_wrong_records(variant, line, why):
    fn = parse_file(str(LOOP)).functions[0] if variant is None else _variant(*variant)
    fake = fn.copy()
    fake.body = [Raw(COMMENT, line)] + fake.body
    with pytest.raises(VerificationError, match=why):
        induced_original(fn, fake)
    if variant is not None:
        # the pass itself does not take that family
        got = induction_function(fn)
        assert got is None or RECORD not in [f.line() for f in got.families]


def test_a_read_between_the_advances_is_refused():
    fn = _read_between_advances()
    # the fourth load is now instruction 30, the first advance instruction 23
    record = parse_line(" 19> 23,31,32,33 10,12,14,16 20,21,22,30")
    with pytest.raises(VerificationError, match="between the advances"):
        check_families(fn, [record])
    assert induction_function(fn) is None


def test_a_member_in_two_records_is_refused():
    fn = parse_file(str(LOOP)).functions[0]
    twice = [Family(19, ">", (30, 31), (10, 12), (20, 21)),
             Family(19, ">", (31, 32), (12, 14), (21, 22))]
    with pytest.raises(VerificationError, match="distinct"):
        check_families(fn, twice)


def test_apply_refuses_records_that_do_not_fit():
    fn = parse_file(str(LOOP)).functions[0]
    with pytest.raises(ValueError, match="not an advance"):
        apply_families(fn, [Family(19, ">", (29, 30), (10, 12), (20,))])
    with pytest.raises(ValueError, match="reads no member"):
        apply_families(fn, [Family(19, ">", (30, 31), (10, 12), (24,))])


def test_attention_backward_families():
    fn = parse_file(str(ATTN_BWD)).functions[0]
    got = induction_function(fn)
    # two loops, each with 32 pointers from two bases advanced by one stride: four families
    assert len(got.families) == 4
    assert [len(f.advances) for f in got.families] == [16] * 4
    check_families(fn, got.families)
    before = pressure_of(recomputed(fn)).max_live
    after = pressure_of(recomputed(got.function)).max_live
    assert after <= before - 16, (before, after)


def _allocated(tmp_path, path, knobs):
    res = allocate(path.read_text(), 255, knobs=knobs, filename=str(path))
    out = tmp_path / "out.ptx"
    out.write_text(res.ptx)
    return res, out


def test_the_whole_chain_is_proven_and_assembles(tmp_path, capsys):
    res, out = _allocated(tmp_path, LOOP, {"induction": 1})
    f = res.functions[0]
    assert f.verified
    assert f.extra["induction"] == {"families": 1, "pointers": 4, "max_live_before": 20,
                                    "max_live_after": 15}
    assert "induction=1" in res.ptx and RECORD in res.ptx
    assert main(["verify", str(LOOP), str(out)]) == 0
    assert "verified:" in capsys.readouterr().out
    if ptxas.available():
        assert ptxas.assemble(res.ptx, "sm_80").ok
    # with the other pre-passes in the same chain, and through the CLI
    out2 = tmp_path / "cli.ptx"
    assert main(["allocate", str(LOOP), "--knob", "induction=1", "--knob", "schedule=1",
                 "--knob", "hoist=1", "--registers", "12", "-o", str(out2)]) == 0
    assert "induction=1" in out2.read_text()
    assert main(["verify", str(LOOP), str(out2)]) == 0


def test_off_by_default_and_without_recomputation_not_kept():
    res = allocate(LOOP.read_text(), 255, filename=str(LOOP))
    assert "induction=" not in res.ptx and "//@induction" not in res.ptx
    # on its own the rewrite adds the counter: MaxLive does not fall, so it is not kept
    res = allocate(LOOP.read_text(), 255, knobs={"induction": 1, "recompute": 0},
                   filename=str(LOOP))
    assert "//@induction" not in res.ptx


def test_a_tampered_record_is_refuted(tmp_path, capsys):
    res, out = _allocated(tmp_path, LOOP, {"induction": 1})
    # drop the last read: the load of %rd14 would read the entry value, not the advanced one
    out.write_text(res.ptx.replace(RECORD, RECORD[:-3]))
    assert main(["verify", str(LOOP), str(out)]) == 1
    assert "reads of members" in capsys.readouterr().err


CROSS_BASE = DATA / "hand" / "induction_cross_base.ptx"
CROSS_OFFSET = DATA / "hand" / "induction_cross_offset.ptx"


@pytest.mark.parametrize("path, records", [
    # the second loop's pointers start from the first family's member %rd11 (its base)
    (CROSS_BASE, ["12> 18,19 9,10 13,14,20,21", "24> 30,31 20,21 25,26"]),
    # ... or add it as their offset
    (CROSS_OFFSET, ["12> 18,19 9,10 13,14,20,21", "24> 30,31 20,21 25,26"]),
], ids=["base", "offset"])
def test_a_family_built_on_another_familys_member_is_refused(path, records):
    """Found in review: the rewrite stops advancing the first family's members and may drop
    their entry definitions, so a second family whose base or offset is such a member read an
    undefined or stale %rd11 in its loop — and the validator accepted it."""
    fn = parse_file(str(path)).functions[0]
    families = [parse_line(r) for r in records]
    with pytest.raises(VerificationError, match=r"base or an offset, %rd1[12], is a member"):
        check_families(fn, families)
    # the pass leaves such a family alone, and what it does is proven through the chain
    found = induction_function(fn)
    for f in (found.families if found else []):
        assert f.advances != (30, 31)
    res = allocate(path.read_text(), knobs={"induction": 1}, filename=path.name)
    assert {f.verified for f in res.functions} == {True}
    assert "24> 30,31" not in res.ptx
