"""Predicates beyond P0-P6 without a general register held whole (issue 13, session 8;
docs/decisions.md "Predicates beyond P0-P6: recomputed, or in slots"): a spilled predicate is
recomputed at its uses from the registers its ``setp`` read where they are still live there
(``spill/remat.py``, knob ``RematPredicates``), or else kept in a spill slot with a register
only around each definition and use (``spill/rewrite.py``, knob ``PredicateSlots``); the
checker proves both, and refutes a recomputation whose operand was redefined in between."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import DATA, assert_chain_proven_and_assembles, corpus_module
from ptxalloc.alloc.driver import Options
from ptxalloc.errors import VerificationError
from ptxalloc.pipeline import allocate, allocate_module
from ptxalloc.ptx import parse
from ptxalloc.verify import parse_allocated, verify_modules

HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"
AS_WRITTEN = {"schedule": 0, "recompute": 0}
HELD_WHOLE = {"RematPredicates": 0, "PredicateSlots": 0}

# eight comparisons of two loaded values; the stores under them read the same two values, so
# %r1 and %r2 are live at every guarded store: a spilled predicate is recomputed there
EIGHT_RECOMPUTED = HDR + """.visible .entry eight(.param .u64 out)
{
	.reg .pred %p<9>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	ld.global.u32 %r1, [%rd1];
	ld.global.u32 %r2, [%rd1+4];
	setp.lt.s32 %p1, %r1, %r2;
	setp.le.s32 %p2, %r1, %r2;
	setp.gt.s32 %p3, %r1, %r2;
	setp.ge.s32 %p4, %r1, 7;
	setp.eq.s32 %p5, %r1, %r2;
	setp.ne.s32 %p6, %r1, %r2;
	setp.lt.u32 %p7, %r1, %r2;
	setp.gt.u32 %p8, %r2, 100;
	@%p1 st.global.u32 [%rd1+8], %r1;
	@%p2 st.global.u32 [%rd1+12], %r2;
	@%p3 st.global.u32 [%rd1+16], %r1;
	@%p4 st.global.u32 [%rd1+20], %r2;
	@%p5 st.global.u32 [%rd1+24], %r1;
	@%p6 st.global.u32 [%rd1+28], %r2;
	@%p7 st.global.u32 [%rd1+32], %r1;
	@%p8 st.global.u32 [%rd1+36], %r2;
	ret;
}
"""

# nine comparisons whose operands die at once: four loaded values, summed, are what the
# guarded stores write, so no setp can be repeated at a store; the predicates defined before
# the loads (off the peak) go to spill slots, and no general register holds one across it
NINE_SPLIT = HDR + """.visible .entry nine(.param .u64 out)
{
	.reg .pred %p<10>;
	.reg .b32 %r<12>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	ld.global.u32 %r1, [%rd1];
	setp.lt.s32 %p1, %r1, 1;
	setp.lt.s32 %p2, %r1, 2;
	setp.lt.s32 %p3, %r1, 3;
	setp.lt.s32 %p4, %r1, 4;
	setp.lt.s32 %p5, %r1, 5;
	setp.lt.s32 %p6, %r1, 6;
	setp.lt.s32 %p7, %r1, 7;
	setp.lt.s32 %p8, %r1, 8;
	setp.lt.s32 %p9, %r1, 9;
	ld.global.u32 %r2, [%rd1+4];
	ld.global.u32 %r3, [%rd1+8];
	ld.global.u32 %r4, [%rd1+12];
	ld.global.u32 %r5, [%rd1+16];
	add.s32 %r6, %r2, %r3;
	add.s32 %r7, %r4, %r5;
	add.s32 %r8, %r6, %r7;
	@%p1 st.global.u32 [%rd1+8], %r8;
	@%p2 st.global.u32 [%rd1+12], %r8;
	@%p3 st.global.u32 [%rd1+16], %r8;
	@%p4 st.global.u32 [%rd1+20], %r8;
	@%p5 st.global.u32 [%rd1+24], %r8;
	@%p6 st.global.u32 [%rd1+28], %r8;
	@%p7 st.global.u32 [%rd1+32], %r8;
	@%p8 st.global.u32 [%rd1+36], %r8;
	@%p9 st.global.u32 [%rd1+40], %r8;
	ret;
}
"""

# one comparison, then its operand %r1 redefined before the store it guards
REDEFINED = HDR + """.visible .entry redefined(.param .u64 out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	ld.global.u32 %r1, [%rd1];
	ld.global.u32 %r2, [%rd1+4];
	setp.lt.s32 %p1, %r1, %r2;
	add.s32 %r1, %r1, 1;
	@%p1 st.global.u32 [%rd1+8], %r1;
	st.global.u32 [%rd1+12], %r2;
	ret;
}
"""


def _proven_and_assembled(text: str, res) -> None:
    assert_chain_proven_and_assembles(parse(text), res, "sm_80")


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
def test_eight_predicates_recomputed_from_live_registers(allocator):
    res = allocate(EIGHT_RECOMPUTED, registers=255, allocator=allocator, knobs=AS_WRITTEN)
    (fr,) = res.functions
    text = res.ptx
    assert fr.verified is True
    # predicates beyond P0-P6 are recomputed: no general register and no slot holds one
    assert (fr.registers, fr.max_live_legalized) == (4, 4)
    # the first recomputed needs a P register where seven are live: a second one is
    assert fr.rematerialized == 2
    assert fr.spill_stores_bytes == fr.spill_loads_bytes == 0
    assert "//@pspill" not in text and "//@preload" not in text
    remats = re.findall(r"^\s*(setp\.\S+)\s+%P\d, %R\d+, (?:%R\d+|\d+);\s*//@remat (%p\d)#\d+",
                        text, re.M)
    assert remats and all(op.startswith("setp.") for op, _ in remats)
    assert len(re.findall(r"//@removed setp", text)) == len({p for _, p in remats})
    assert fr.extra["register_floor"] == {"registers": 4, "from": "MaxLive"}
    _proven_and_assembled(EIGHT_RECOMPUTED, res)
    # held whole instead: one general register per spilled predicate more
    (held,) = allocate(EIGHT_RECOMPUTED, registers=255, allocator=allocator,
                       knobs={**AS_WRITTEN, **HELD_WHOLE}).functions
    assert held.verified is True and held.registers == 6


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
def test_predicates_whose_operands_die_go_to_slots(allocator):
    res = allocate(NINE_SPLIT, registers=255, allocator=allocator, knobs=AS_WRITTEN)
    (fr,) = res.functions
    text = res.ptx
    assert fr.verified is True
    assert fr.rematerialized == 0                   # %r1 is dead at every store
    slots = fr.extra["predicate_slots"]
    assert slots["kept"] == "slots"
    # three predicates spilled (each reload needs a P register where seven are live): held
    # whole, three general registers across the peak
    assert fr.registers == fr.max_live_legalized == 6 < slots["registers_in_registers"] == 9
    # each spilled predicate: selp into a register and a store after its setp, a load and a
    # setp.ne before each use; the register is live across two instructions only
    stores = re.findall(r"^\s*st\.local\.b32\s+\[__ptxalloc_spill\+\d+\], %R\d+;\s*"
                        r"//@spill (%p\d)#\d+", text, re.M)
    loads = re.findall(r"^\s*ld\.local\.b32\s+%R\d+, \[__ptxalloc_spill\+\d+\];\s*"
                       r"//@reload (%p\d)#\d+", text, re.M)
    assert stores and loads and set(loads) == set(stores)
    assert text.count("//@pspill") == len(stores)
    assert fr.spill_stores_bytes == 4 * len(stores)
    assert fr.extra["register_floor"] == {"registers": 6, "from": "MaxLive"}
    _proven_and_assembled(NINE_SPLIT, res)
    # knob PredicateSlots=0: held in general registers
    (held,) = allocate(NINE_SPLIT, registers=255, allocator=allocator,
                       knobs={**AS_WRITTEN, "PredicateSlots": 0}).functions
    assert held.verified is True and held.registers == 9
    assert held.spill_stores_bytes == 0


def _tampered(remat_before_redefinition: bool) -> str:
    """REDEFINED allocated as written, then edited by hand: its setp removed and repeated
    before the store (``//@remat``), after the ``add`` that redefines %r1 or before it."""
    module = parse(REDEFINED)
    text = allocate(REDEFINED, registers=255, knobs=AS_WRITTEN).ptx
    setp = re.search(r"^\s*setp\.lt\.s32\s+(%P\d), (%R\d+), (%R\d+);\n", text, re.M)
    add = re.search(r"^\s*add\.s32\s+%R\d+, %R\d+, 1;\n", text, re.M)
    assert setp and add and setp.end() <= add.start()
    p, a, b = setp.groups()
    vid = module.functions[0].regs.names.index("%p1")
    removed = f"\t//@removed setp.lt.s32\t{p}, {a}, {b};\n"
    remat = f"\tsetp.lt.s32\t{p}, {a}, {b};\t//@remat %p1#{vid}\n"
    if remat_before_redefinition:
        return (text[:setp.start()] + removed + text[setp.end():add.start()] + remat
                + text[add.start():])
    return (text[:setp.start()] + removed + text[setp.end():add.end()] + remat
            + text[add.end():])


def test_checker_refutes_a_recomputation_after_its_operand_is_redefined():
    original = parse(REDEFINED)
    # repeated before the add: the operands hold what the setp read, proven
    verify_modules(original, parse_allocated(_tampered(True), "ok.ptx"))
    # after the add, %r1's register holds %r1, but not the value the setp read
    with pytest.raises(VerificationError, match=r"redefined or died since"):
        verify_modules(original, parse_allocated(_tampered(False), "tampered.ptx"))


def test_the_allocator_does_not_recompute_across_a_redefinition():
    """The same program with nine predicates live: %p1 is not recomputed (%r1 changes before
    its use), the others are where they are spilled."""
    text = REDEFINED.replace(".reg .pred %p<2>;", ".reg .pred %p<10>;").replace(
        "\tadd.s32 %r1, %r1, 1;\n",
        "".join(f"\tsetp.gt.s32 %p{k}, %r2, {k};\n" for k in range(2, 10))
        + "\tadd.s32 %r1, %r1, 1;\n"
        + "".join(f"\t@%p{k} st.global.u32 [%rd1+{4 * k + 16}], %r2;\n" for k in range(2, 10)))
    res = allocate(text, registers=255, knobs=AS_WRITTEN)
    (fr,) = res.functions
    assert fr.verified is True
    assert "//@remat %p1#" not in res.ptx
    _proven_and_assembled(text, res)


def test_many_predicates_across_a_branch_recomputed_under_a_budget():
    """tests/data/hand/many_preds.ptx as written: 12 predicates live across a branch, their
    operands live at the join's uses. At K = 15, held in general registers they push values
    to memory; recomputed, none is stored and the allocation takes MaxLive."""
    text = (DATA / "hand" / "many_preds.ptx").read_text()
    res = allocate(text, registers=15, knobs=AS_WRITTEN)
    (fr,) = res.functions
    assert fr.verified is True
    assert (fr.registers, fr.rematerialized) == (12, 6)
    assert fr.spill_stores_bytes == fr.spill_loads_bytes == 0
    _proven_and_assembled(text, res)
    (held,) = allocate(text, registers=15, knobs={**AS_WRITTEN, "RematPredicates": 0}).functions
    assert held.verified is True
    assert (held.registers, held.spill_stores_bytes) == (15, 12)


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
def test_triton_vector_add_at_max_live_in_slots_kept_only_where_more_warps_fit(allocator):
    """Triton's vector add (sm_80): 8 predicates live beside 18 registers. Held whole, two
    spilled predicates take 20 registers (floor 19 without slots,
    tests/unit/test_register_floor.py); in slots, 18 = MaxLive, for 8 bytes stored and 12-16
    loaded. Registers are allocated 8 per thread at a time, so 18 hold no more warps than 20:
    by default the second allocation is not even tried, and ``PredicateSlots=3`` keeps the
    one in slots."""
    text = (DATA / "triton" / "sm80_vector_add.ptx").read_text()
    res = allocate(text, registers=255, allocator=allocator)
    (fr,) = res.functions
    assert fr.verified is True
    assert (fr.registers, fr.max_live_legalized, fr.spill_stores_bytes) == (20, 18, 0)
    # not even tried: MaxLive itself would fit no more warps than 20 registers
    assert "predicate_slots" not in fr.extra
    _proven_and_assembled(text, res)
    res = allocate(text, registers=255, allocator=allocator, knobs={"PredicateSlots": 3})
    (fr,) = res.functions
    assert fr.verified is True
    assert (fr.registers, fr.max_live_legalized) == (18, 18)
    assert fr.extra["register_floor"] == {"registers": 18, "from": "MaxLive"}
    assert fr.extra["predicate_slots"]["kept"] == "slots"
    assert fr.extra["predicate_slots"]["registers_in_registers"] == 20
    assert fr.spill_stores_bytes == 8
    _proven_and_assembled(text, res)


def test_slots_are_kept_where_fewer_registers_let_more_warps_fit():
    """The rule itself (alloc/driver.py): registers go 8 a thread at a time, so 20 -> 18 and
    24 -> 18 fit no more warps (24 a thread either way), 33 -> 32 and 25 -> 24 do."""
    from ptxalloc.alloc.driver import FunctionResult, _keep_slots_where_more_warps_fit
    from ptxalloc.target.sm import profile_for

    def result(registers):
        return FunctionResult(name="k", allocator="briggs", budget=255, registers=registers)
    sm = profile_for("sm_80")
    for held, slotted, kept in ((20, 18, 20), (24, 18, 24), (33, 32, 32), (25, 24, 24)):
        got = _keep_slots_where_more_warps_fit(result(held), result(slotted), sm)
        assert got.registers == kept, (held, slotted)
        assert got.extra["predicate_slots"]["kept"] == ("slots" if kept == slotted
                                                         else "registers")


@pytest.mark.corpus
def test_gpuocelot_genericmemory_at_max_live_with_slots():
    """gpuocelot's generic.ptx ``genericmemory``: 9 ``isspacep`` predicates live; held whole,
    7 registers against MaxLive 4; in slots (kept with ``PredicateSlots=3``), 4. 7 and 4
    registers hold as many warps (8 a thread), so the default keeps 7."""
    path = "gpuocelot/tests/ptx/synthetic/generic.ptx"
    module, arch = corpus_module(path)
    for allocator in ("briggs", "fatpoint"):
        res = allocate_module(module, registers=255, allocator=allocator, arch=arch)
        fr = next(f for f in res.functions if f.name == "genericmemory")
        assert (fr.registers, fr.max_live_legalized) == (7, 4), allocator
        assert "predicate_slots" not in fr.extra        # 4 fit no more warps than 7
        res = allocate_module(module, registers=255, allocator=allocator, arch=arch,
                              options=Options(knobs={"PredicateSlots": 3}))
        fr = next(f for f in res.functions if f.name == "genericmemory")
        assert fr.verified is True
        assert (fr.registers, fr.max_live_legalized) == (4, 4), allocator
        assert fr.extra["predicate_slots"]["registers_in_registers"] == 7
        assert_chain_proven_and_assembles(module, res, arch)


def test_a_budget_too_small_for_the_operands_allocates_without_recomputing():
    """Found by the property test below: at K = 4, recomputing %p1 from %r1 and %r2 at its
    store keeps both in registers beside the store's address and value, and a later round
    gets stuck; the function is allocated again without recomputing predicates."""
    text = HDR + """.visible .entry fuzz(.param .u64 out)
{
	.reg .pred %p<9>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	ld.global.u32 %r1, [%rd1+4];
	ld.global.u32 %r2, [%rd1+8];
	ld.global.u32 %r3, [%rd1+12];
	ld.global.u32 %r4, [%rd1+16];
	ld.global.u32 %r5, [%rd1+20];
	setp.lt.s32 %p1, %r1, %r2;
""" + "".join(f"\tsetp.lt.s32 %p{k}, %r1, %r1;\n" for k in range(2, 9)) + """	@%p2 st.global.u32 [%rd1+64], %r1;
	@%p1 st.global.u32 [%rd1+68], %r3;
	@%p3 st.global.u32 [%rd1+72], %r4;
	@%p4 st.global.u32 [%rd1+76], %r5;
	@%p5 st.global.u32 [%rd1+80], %r1;
	@%p6 st.global.u32 [%rd1+84], %r1;
	@%p7 st.global.u32 [%rd1+88], %r1;
	@%p8 st.global.u32 [%rd1+92], %r2;
	ret;
}
"""
    for allocator in ("briggs", "fatpoint"):
        res = allocate(text, registers=4, allocator=allocator, knobs=AS_WRITTEN)
        (fr,) = res.functions
        assert fr.verified is True and fr.registers <= 4
        assert any("allocated without recomputing them" in n for n in fr.notes), fr.notes
        _proven_and_assembled(text, res)


@st.composite
def _predicate_programs(draw):
    """Straight-line kernels with 8 to 12 predicates live at once: values loaded, compared,
    some redefined between the comparisons and the guarded stores."""
    n_values = draw(st.integers(2, 5))
    n_preds = draw(st.integers(8, 12))
    body = [f"\tld.global.u32 %r{k}, [%rd1+{4 * k}];" for k in range(1, n_values + 1)]
    for p in range(1, n_preds + 1):
        a = draw(st.integers(1, n_values))
        b = draw(st.one_of(st.integers(1, n_values).map(lambda k: f"%r{k}"),
                           st.integers(0, 99).map(str)))
        op = draw(st.sampled_from(["lt.s32", "le.u32", "gt.s32", "eq.s32", "ne.u32"]))
        body.append(f"\tsetp.{op} %p{p}, %r{a}, {b};")
    redefined = draw(st.lists(st.integers(1, n_values), max_size=3))
    uses = draw(st.permutations(list(range(1, n_preds + 1))))
    for i, p in enumerate(uses):
        if i < len(redefined):
            body.append(f"\tadd.s32 %r{redefined[i]}, %r{redefined[i]}, 1;")
        v = draw(st.integers(1, n_values))
        body.append(f"\t@%p{p} st.global.u32 [%rd1+{64 + 4 * i}], %r{v};")
    return HDR + (f".visible .entry fuzz(.param .u64 out)\n{{\n\t.reg .pred %p<{n_preds + 1}>;\n"
                  f"\t.reg .b32 %r<{n_values + 1}>;\n\t.reg .b64 %rd<2>;\n"
                  "\tld.param.u64 %rd1, [out];\n" + "\n".join(body) + "\n\tret;\n}\n")


#: found by the property test below after the post-allocation cleanup merged: %r3's only
#: original reads after its load are the setp of %p3 (recomputed, its definition removed) and
#: an add the cleanup removed as dead, so the checker's liveness let %r3 die before the
#: recomputation reading it (a recomputation's register reads now count as uses there)
OPERAND_READ_ONLY_BY_THE_RECOMPUTATION = HDR + """.visible .entry fuzz(.param .u64 out)
{
	.reg .pred %p<11>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	ld.global.u32 %r1, [%rd1+4];
	ld.global.u32 %r2, [%rd1+8];
	ld.global.u32 %r3, [%rd1+12];
""" + "".join(f"\tsetp.lt.s32 %p{p}, %r1, %r{3 if p == 3 else 1};\n" for p in range(1, 11)) + \
    """\tadd.s32 %r2, %r2, 1;
\t@%p3 st.global.u32 [%rd1+64], %r1;
\tadd.s32 %r3, %r3, 1;
""" + "".join(f"\t@%p{p} st.global.u32 [%rd1+{64 + 4 * i}], %r1;\n"
              for i, p in enumerate((2, 1, 4, 5, 6, 7, 8, 9, 10), 1)) + "\tret;\n}\n"


@settings(max_examples=200, deadline=None)
@given(_predicate_programs(), st.sampled_from([4, 6, 255]))
@example(OPERAND_READ_ONLY_BY_THE_RECOMPUTATION, 4)
def test_recomputed_and_slotted_predicates_are_always_proven(text, k):
    """Whatever mix of recomputation, slots and registers the spiller picks, the independent
    checker proves it (``allocate`` verifies; a refutation would raise), also where the operands spill
    (K = 4, 6)."""
    for allocator in ("briggs", "fatpoint"):
        res = allocate(text, registers=k, allocator=allocator, knobs=AS_WRITTEN)
        assert {f.verified for f in res.functions} == {True}
        assert all(f.predicates <= 7 for f in res.functions)
