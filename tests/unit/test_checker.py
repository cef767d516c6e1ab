"""The independent checker (issue 5, SPEC section 9) on hand-written pairs of original and
allocated PTX: what it proves (joins, loops, guarded definitions, implicit definitions at entry,
spill code, removed copies, rematerialization, predicate saves, pinned old-ABI registers, the
calling convention, asynchronous registers) and what it refutes, with its messages; the
emitter-drift check; and every allocation of the project's own PTX."""

from __future__ import annotations

import re

import pytest

from conftest import DATA, assert_justified_refusal
from ptxalloc.errors import AllocationError, VerificationError
from ptxalloc.pipeline import allocate, allocate_module
from ptxalloc.ptx import parse, parse_file
from ptxalloc.verify import (CheckerInputError, check_no_drift, parse_allocated,
                             verify_module_text, verify_modules)
from ptxalloc.verify.blocks import Blocks
from ptxalloc.verify.locations import Locations, NameDecoder

HDR = ".version 8.0\n.target sm_90\n.address_size 64\n"


def kernel(body: str, header: str | None = None, params: str = ".param .u64 k_p") -> str:
    head = "" if header is None else f"\t//@ptxalloc allocator=briggs {header}\n"
    return f"{HDR}.visible .entry k({params})\n{{\n{head}{body}\n}}\n"


def prove(original: str, allocated: str):
    return verify_modules(parse(original, "orig.ptx"), parse_allocated(allocated, "alloc.ptx"))


def refute(original: str, allocated: str, pattern: str) -> str:
    with pytest.raises(VerificationError) as e:
        prove(original, allocated)
    assert re.search(pattern, str(e.value)), str(e.value)
    return str(e.value)


K8 = "budget=8 arch=sm_90 stem="

# --- straight-line code and aliasing ---------------------------------------------------------

ORIG_LINE = kernel("""\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tadd.s32 %r2, %r1, 1;
\tst.global.u32 [%rd1], %r2;
\tret;""")


def line_alloc(pair: str = "%RD6", decl: str = "%RD<8>") -> str:
    return kernel(f"""\t.reg .b32 %R<2>;
\t.reg .b64 {decl};
\tld.param.u64 {pair}, [k_p];
\tld.global.u32 %R0, [{pair}];
\tadd.s32 %R0, %R0, 1;
\tst.global.u32 [{pair}], %R0;
\tret;""", K8)


def test_straight_line_proof_and_summary():
    (proof,) = prove(ORIG_LINE, line_alloc())
    assert proof.instructions == 5 and proof.blocks == 1
    assert proof.summary().startswith("verified: kernel 'k' (briggs, budget 8, sm_90): 5 "
                                      "instructions")


def test_units_decide_a_pair_overlapping_a_32_bit_register():
    # RD0 is R0:R1: writing R0 destroys the address
    msg = refute(ORIG_LINE, line_alloc("%RD0"),
                 r"kernel 'k', line \d+ 'st.global.u32 \[%RD0\], %R0;' \(original line 11\): "
                 r"operand 1 should hold %rd1#0 but %RD0 holds nothing; %rd1#0 is held nowhere")
    assert "(original line 11)" in msg


def test_halves_alias_their_register():
    orig = kernel("""\t.reg .b16 %rs<3>;
\t.reg .b32 %r<3>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u16 %rs1, [%rd1];
\tld.global.u32 %r1, [%rd1+4];
\tst.global.u16 [%rd1], %rs1;
\tst.global.u32 [%rd1+4], %r1;
\tret;""")
    body = """\t.reg .b16 %H<8>;
\t.reg .b32 %R<4>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u16 %H{h}, [%RD6];
\tld.global.u32 %R{r}, [%RD6+4];
\tst.global.u16 [%RD6], %H{h};
\tst.global.u32 [%RD6+4], %R{r};
\tret;"""
    prove(orig, kernel(body.format(h=1, r=1), K8))          # H1 is a half of R0: no overlap
    refute(orig, kernel(body.format(h=3, r=1), K8),        # H3 is the high half of R1
           r"operand 2 should hold %rs1#\d+ but %H3 holds nothing")


def test_placements_class_budget_alignment_and_declarations():
    refute(ORIG_LINE, line_alloc("%RD3", "%RD<8>"), r"%RD3 is not an even-aligned pair")
    refute(ORIG_LINE, line_alloc("%RD8", "%RD<9>"), r"%RD8 \(R8:R9\) is outside the budget of 8")
    refute(ORIG_LINE, line_alloc("%R2", "%RD<8>").replace(".reg .b32 %R<2>;",
                                                          ".reg .b32 %R<3>;"),
           r"operand 1: %R2 cannot hold %rd1#0, a GPR64 value \(needs %RD\)")
    refute(ORIG_LINE, line_alloc().replace(".reg .b32 %R<2>;", ".reg .b64 %R<2>;"),
           r"%R0 is declared \.b64, not \.b32")


def test_decoder_and_overlaps():
    d = NameDecoder("", 15)
    p = d.decode("%RD12")
    assert (p.family, p.start, p.size) == ("RD", 24, 4)
    assert d.decode("%RD14").startswith("%RD14 (R14:R15) is outside the budget")
    assert d.decode("%RQ2").startswith("%RQ2 is not a 4-aligned quad")
    assert d.decode("%P7").startswith("%P7 is not a predicate register")
    assert d.decode("%H29").family == "H" and isinstance(d.decode("%H30"), str)
    assert d.decode("%V4x32_8").size == 8 and isinstance(d.decode("%V4x32_4"), str)
    assert d.decode("%r1") is None and isinstance(d.decode("%R01"), str)
    assert NameDecoder("x", 4).decode("%R1") is None
    locs = Locations("s")
    r4 = locs.register(d.decode("%R4"), "%R4")
    rd4 = locs.register(d.decode("%RD4"), "%RD4")
    h9 = locs.register(d.decode("%H9"), "%H9")
    r5 = locs.register(d.decode("%R5"), "%R5")
    assert set(locs.overlaps[r4]) == {r4, rd4, h9}
    assert set(locs.overlaps[r5]) == {r5, rd4}
    s0 = locs.slot(0, 8)
    s4 = locs.slot(4, 4)
    assert s4 in locs.overlaps[s0] and locs.slot(8, 4) not in locs.overlaps[s0]


# --- control flow ----------------------------------------------------------------------------

ORIG_DIAMOND = kernel("""\t.reg .pred %p<2>;
\t.reg .b32 %r<6>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tsetp.gt.s32 %p1, %r1, 10;
\t@%p1 bra $L_then;
\tmul.lo.s32 %r3, %r1, 3;
\tbra.uni $L_join;
$L_then:
\tshl.b32 %r3, %r1, 2;
$L_join:
\tadd.s32 %r4, %r3, %r1;
\tst.global.u32 [%rd1], %r4;
\tret;""")


def diamond(then_reg: str) -> str:
    return kernel(f"""\t.reg .pred %P<1>;
\t.reg .b32 %R<3>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\tsetp.gt.s32 %P0, %R0, 10;
\t@%P0 bra $L_then;
\tmul.lo.s32 %R1, %R0, 3;
\tbra.uni $L_join;
$L_then:
\tshl.b32 {then_reg}, %R0, 2;
$L_join:
\tadd.s32 %R0, %R1, %R0;
\tst.global.u32 [%RD6], %R0;
\tret;""", K8)


def test_join_meets_by_intersection():
    (proof,) = prove(ORIG_DIAMOND, diamond("%R1"))
    assert proof.blocks == 4
    # %r3 sits in R1 on one arm and in R2 on the other: at the join R1 holds it on one path only
    refute(ORIG_DIAMOND, diamond("%R2").replace("%R<3>", "%R<3>"),
           r"line \d+ 'add.s32 %R0, %R1, %R0;' .*operand 2 should hold %r3#\d+ but %R1 holds "
           r"nothing")


ORIG_LOOP = kernel("""\t.reg .pred %p<2>;
\t.reg .b32 %r<6>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tmov.u32 %r2, 0;
$L_loop:
\tadd.s32 %r3, %r2, %r1;
\tadd.s32 %r2, %r2, 1;
\tsetp.lt.s32 %p1, %r3, 100;
\t@%p1 bra $L_loop;
\tst.global.u32 [%rd1], %r2;
\tret;""")


def loop(r3: str) -> str:
    return kernel(f"""\t.reg .pred %P<1>;
\t.reg .b32 %R<3>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\tmov.u32 %R1, 0;
$L_loop:
\tadd.s32 {r3}, %R1, %R0;
\tadd.s32 %R1, %R1, 1;
\tsetp.lt.s32 %P0, {r3}, 100;
\t@%P0 bra $L_loop;
\tst.global.u32 [%RD6], %R1;
\tret;""", K8)


def test_values_live_across_a_back_edge():
    (proof,) = prove(ORIG_LOOP, loop("%R2"))
    assert proof.block_visits >= 3
    # %r3 in R0 destroys %r1, which the next iteration reads again
    refute(ORIG_LOOP, loop("%R0"), r"line \d+ 'add.s32 %R0, %R1, %R0;' .*operand 3 should hold "
                                   r"%r1#\d+ but %R0 holds nothing")


def test_unreachable_blocks_are_matched_but_carry_no_values():
    orig = kernel("""\t.reg .b32 %r<3>;
\tret;
\tadd.s32 %r1, %r2, 1;
\tret;""")
    prove(orig, kernel("\t.reg .b32 %R<2>;\n\tret;\n\tadd.s32 %R0, %R1, 1;\n\tret;", K8))
    refute(orig, kernel("\t.reg .b32 %R<9>;\n\tret;\n\tadd.s32 %R0, %R8, 1;\n\tret;", K8),
           r"%R8 \(R8\) is outside the budget")


def test_brx_targets():
    path = DATA / "hand" / "brx.ptx"
    text = allocate(path.read_text(), 4, filename=str(path)).ptx
    prove(path.read_text(), text)
    bad = re.sub(r"(\$L_table: \.branchtargets )\$L_c0, \$L_c1", r"\1$L_c1, $L_c0", text)
    refute(path.read_text(), bad, "directives differ|branch target lists differ")


# --- guarded definitions, implicit definitions at entry --------------------------------------

ORIG_GUARDED = kernel("""\t.reg .pred %p<2>;
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tsetp.gt.s32 %p1, %r1, 10;
\tmov.u32 %r2, 7;
\t@%p1 mov.u32 %r2, %r1;
\tst.global.u32 [%rd1], %r2;
\tret;""")


def test_guarded_definition_keeps_the_old_value_only_in_place():
    body = """\t.reg .pred %P<1>;
\t.reg .b32 %R<3>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\tsetp.gt.s32 %P0, %R0, 10;
\tmov.u32 %R{a}, 7;
\t@%P0 mov.u32 %R{b}, %R0;
\tst.global.u32 [%RD6], %R{b};
\tret;"""
    prove(ORIG_GUARDED, kernel(body.format(a=1, b=1), K8))
    # when the guard is false R2 does not hold the old %r2 (it is in R1)
    refute(ORIG_GUARDED, kernel(body.format(a=1, b=2), K8),
           r"'st.global.u32 \[%RD6\], %R2;' .*operand 2 should hold %r2#\d+ but %R2 holds "
           r"nothing; %r2#\d+ is held nowhere")


ORIG_UNDEF = kernel("""\t.reg .pred %p<2>;
\t.reg .b32 %r<6>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tsetp.eq.s32 %p1, %r1, 0;
\t@!%p1 bra $L_join;
\tmov.u32 %r3, 42;
$L_join:
\tadd.s32 %r4, %r3, %r1;
\tst.global.u32 [%rd1], %r4;
\tret;""")


def test_implicit_definition_at_entry():
    body = """\t.reg .pred %P<1>;
\t.reg .b32 %R<3>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R{r1}, [%RD6];
\tsetp.eq.s32 %P0, %R{r1}, 0;
\t@!%P0 bra $L_join;
\tmov.u32 %R1, 42;
$L_join:
\tadd.s32 %R0, %R1, %R{r1};
\tst.global.u32 [%RD6], %R0;
\tret;"""
    # %r3 is read before any definition on one path: untouched R1 "holds" it there
    prove(ORIG_UNDEF, kernel(body.format(r1=0), K8))
    # ... but not once R1 was written with %r1 on that path
    refute(ORIG_UNDEF, kernel(body.format(r1=1), K8), r"operand 2 should hold %r3#\d+ but %R1")


# --- spill code ------------------------------------------------------------------------------

SPILL = "budget=8 arch=sm_90 stem= spill=__ptxalloc_spill frame=16"


def spilled(store: str = "st.local.b64\t[__ptxalloc_spill+0], %RD6;\t//@spill %rd1#0",
            reload: str = "ld.local.b64\t%RD6, [__ptxalloc_spill+0];\t//@reload %rd1#0",
            frame: str = "16") -> str:
    return kernel(f"""\t.reg .b32 %R<2>;
\t.reg .b64 %RD<8>;
\t.local .align 16 .b8 __ptxalloc_spill[{frame}];
\tld.param.u64 %RD6, [k_p];
\t{store}
\tld.global.u32 %R0, [%RD6];
\tmov.u32 %R2, 5;\t//@remat %r9#0
\tadd.s32 %R0, %R0, 1;
\t{reload}
\tst.global.u32 [%RD6], %R0;
\tret;""", SPILL.replace("frame=16", f"frame={frame}")).replace("\tmov.u32 %R2, 5;\t//@remat %r9#0\n", "")


def test_spill_and_reload():
    (proof,) = prove(ORIG_LINE, spilled())
    assert proof.inserted["spill"] == 1 and proof.inserted["reload"] == 1


def test_spill_code_refutations():
    refute(ORIG_LINE, spilled(reload="ld.local.b64\t%RD6, [__ptxalloc_spill+8];\t//@reload "
                                     "%rd1#0"),
           r"reload of %rd1#0 reads \[__ptxalloc_spill\+8\] \(8 bytes\), which holds nothing; "
           r"%rd1#0 is in %RD6, \[__ptxalloc_spill\+0\] \(8 bytes\)")
    refute(ORIG_LINE, spilled(reload="ld.local.b32\t%R1, [__ptxalloc_spill+0];\t//@reload "
                                     "%rd1#0"),
           r"a reload of %rd1#0 must be 'ld.local.b64'")
    refute(ORIG_LINE, spilled(store="st.local.b64\t[__ptxalloc_spill+16], %RD6;\t//@spill "
                                    "%rd1#0"),
           r"spill slot \[__ptxalloc_spill\+16\] \(8 bytes\) is outside the 16-byte frame")
    refute(ORIG_LINE, spilled(store="st.local.b64\t[__ptxalloc_spill+4], %RD6;\t//@spill "
                                    "%rd1#0", frame="32"),
           r"not aligned to its width of 8 bytes")
    refute(ORIG_LINE, spilled(store="st.local.b64\t[__ptxalloc_spill+0], %RD6;\t//@spill "
                                    "%rd7#0"),
           r"the annotation names %rd7#0, which is not a register of the original function")


def test_read_at_another_width():
    orig = kernel("""\t.reg .b32 %r<4>;
\t.reg .b64 %rd<3>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tld.global.u64 %rd2, [%rd1+8];
\tst.global.u32 [%rd1], %r1;
\tst.global.u64 [%rd1+8], %rd2;
\tret;""")
    alloc = kernel("""\t.reg .b32 %R<2>;
\t.reg .b64 %RD<8>;
\t.local .align 16 .b8 __ptxalloc_spill[16];
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\tst.local.b32\t[__ptxalloc_spill+0], %R0;\t//@spill %r1#1
\tld.global.u64 %RD0, [%RD6+8];
\tst.local.b64\t[__ptxalloc_spill+0], %RD0;\t//@spill %rd2#2
\tld.local.b32\t%R0, [__ptxalloc_spill+0];\t//@reload %r1#1
\tst.global.u32 [%RD6], %R0;
\tst.global.u64 [%RD6+8], %RD0;
\tret;""", SPILL)
    refute(orig, alloc, r"reload of %r1#1 reads \[__ptxalloc_spill\+0\] \(4 bytes\), which "
                        r"holds nothing")
    # at another width the slot's bytes are another location: a b64 store is no b32 value
    refute(orig, alloc.replace("[__ptxalloc_spill+0], %RD0", "[__ptxalloc_spill+8], %RD0"),
           r"operand 2 should hold %rd2#2|operand 1 should hold")   # RD0 overlaps R0


ORIG_CONST = kernel("""\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tmov.u32 %r1, 5;
\tmov.u32 %r2, %tid.x;
\tadd.s32 %r3, %r1, %r2;
\tst.global.u32 [%rd1], %r3;
\tret;""")


def remat(first: str, second: str = "\tmov.u32\t%R1, 5;\t//@remat %r1#1",
          params: str = ".param .u64 k_p") -> str:
    """An allocation of a kernel computing %r1 + %tid.x: ``first`` stands where %r1's
    definition was, ``second`` just before the add (the rematerialization)."""
    return kernel(f"""\t.reg .b32 %R<2>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
{first}
\tmov.u32 %R0, %tid.x;
{second}
\tadd.s32 %R0, %R1, %R0;
\tst.global.u32 [%RD6], %R0;
\tret;""", K8, params)


def test_rematerialization_and_removed_definitions():
    (proof,) = prove(ORIG_CONST, remat("\t//@removed mov.u32\t%R1, 5;"))
    assert proof.removed == 1 and proof.inserted["remat"] == 1
    refute(ORIG_CONST, remat("\t//@removed mov.u32\t%R1, 5;", "\tmov.u32\t%R1, 6;\t//@remat "
                                                              "%r1#1"),
           r"a rematerialization of %r1#1 must repeat its definition 'mov.u32\t%r1, 5;'")
    refute(ORIG_CONST, remat("\t//@removed mov.u32\t%R1, 5;", ""),
           r"operand 2 should hold %r1#1 but %R1 holds nothing; %r1#1 is held nowhere")
    refute(ORIG_CONST, remat("\t//@removed mov.u32\t%R1, 7;"),
           r"the removed instruction is not the original 'mov.u32\t%r1, 5;'")


def test_rematerialization_needs_a_pure_unique_definition():
    orig = ORIG_CONST.replace("mov.u32 %r2, %tid.x;", "mov.u32 %r2, %clock;")
    alloc = remat("\tmov.u32\t%R1, 5;").replace("mov.u32 %R0, %tid.x;", "mov.u32 %R0, %clock;")
    prove(orig, alloc)
    bad = alloc.replace("\tmov.u32\t%R1, 5;\t//@remat %r1#1", "\tmov.u32\t%R0, %clock;\t//@remat "
                        "%r2#2")
    refute(orig, bad, r"%r2#2 cannot be rematerialized: its definition \(original line \d+\) "
                      r"reads '%clock', which is not constant for the thread")
    twice = ORIG_CONST.replace("\tadd.s32", "\tmov.u32 %r1, 6;\n\tadd.s32")
    refute(twice, remat("\t//@removed mov.u32\t%R1, 5;").replace(
        "\tadd.s32", "\tmov.u32 %R1, 6;\n\tadd.s32"),
        r"%r1#1 has 2 definitions in the original; only a value with one can be rematerialized")


ORIG_PARAM = kernel("""\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.param.u32 %r1, [k_n+4];
\tmov.u32 %r2, %tid.x;
\tadd.s32 %r3, %r1, %r2;
\tst.global.u32 [%rd1], %r3;
\tret;""", params=".param .u64 k_p, .param .align 4 .b8 k_n[8]")


def param_remat(first: str, second: str = "\tld.param.u32\t%R1, [k_n+4];\t//@remat %r1#1",
                params: str = ".param .u64 k_p, .param .align 4 .b8 k_n[8]") -> str:
    return remat(first, second, params)


def test_rematerialized_kernel_parameter_loads():
    """A kernel's parameters are read-only: a load of one may be repeated; a load through a
    register, or of another offset, may not."""
    (proof,) = prove(ORIG_PARAM, param_remat("\t//@removed ld.param.u32\t%R1, [k_n+4];"))
    assert proof.removed == 1 and proof.inserted["remat"] == 1
    refute(ORIG_PARAM, param_remat("\t//@removed ld.param.u32\t%R1, [k_n+4];",
                                   "\tld.param.u32\t%R1, [k_n];\t//@remat %r1#1"),
           r"a rematerialization of %r1#1 must repeat its definition "
           r"'ld.param.u32\t%r1, \[k_n\+4\];'")
    through = ORIG_PARAM.replace("ld.param.u32 %r1, [k_n+4];",
                                 "mov.u64 %rd1, k_n;\n\tld.param.u32 %r1, [%rd1+4];")
    refute(through, param_remat("\tmov.u64\t%RD6, k_n;\n\t//@removed ld.param.u32\t%R1, "
                                "[%RD6+4];\n\tld.param.u64 %RD6, [k_p];",
                                "\tld.param.u32\t%R1, [%RD6+4];\t//@remat %r1#1"),
           r"loads from something that is not a parameter of this kernel")


def test_func_parameter_loads_are_not_rematerialized():
    """A ``.func`` may store to its own parameters: a load of one is not a constant."""
    orig = ORIG_PARAM.replace(".visible .entry k(", ".func k(")
    alloc = param_remat("\t//@removed ld.param.u32\t%R3, [k_n+4];",
                        "\tld.param.u32\t%R3, [k_n+4];\t//@remat %r1#1").replace(
        ".visible .entry k(", ".func k(").replace("budget=8 ", "budget=8 abi=1 ").replace(
        "%RD6", "%RD0").replace("%R0", "%R2").replace("%R1", "%R3").replace("%R<2>", "%R<4>")
    refute(orig, alloc, r"loads from something that is not a parameter of this kernel")


def test_removed_copies():
    orig = kernel("""\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tmov.b32 %r2, %r1;
\tadd.s32 %r3, %r2, %r1;
\tst.global.u32 [%rd1], %r3;
\tret;""")
    body = """\t.reg .b32 %R<2>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\t{copy}
\tadd.s32 %R1, %R0, %R0;
\tst.global.u32 [%RD6], %R1;
\tret;"""
    (proof,) = prove(orig, kernel(body.format(copy="//@removed mov.b32\t%R0, %R0;"), K8))
    assert proof.removed == 1
    # a copy between two registers may be removed only where its value is dead (a removed
    # definition: held nowhere afterwards); here the add reads it
    refute(orig, kernel(body.format(copy="//@removed mov.b32\t%R1, %R0;"), K8),
           r"operand 2 should hold %r2#2 but %R0 holds \{%r1#1\}; %r2#2 is held nowhere")


ORIG_DEAD = kernel("""\t.reg .pred %p<2>;
\t.reg .b32 %r<6>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tadd.s32 %r2, %r1, 7;
\tld.volatile.global.u32 %r3, [%rd1+4];
\tsetp.gt.s32 %p1, %r1, 0;
\t@%p1 add.s32 %r4, %r1, 3;
\tst.global.u32 [%rd1], %r1;
\tret;""")


def dead_alloc(add: str, load: str, guarded: str, store: str = "%R0") -> str:
    return kernel(f"""\t.reg .pred %P<1>;
\t.reg .b32 %R<2>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\t{add}
\t{load}
\tsetp.gt.s32 %P0, %R0, 0;
\t{guarded}
\tst.global.u32 [%RD6], {store};
\tret;""", K8)


KEPT = ("ld.volatile.global.u32 %R1, [%RD6+4];", "@%P0 add.s32 %R1, %R0, 3;")


def test_removed_dead_definitions():
    """Post-allocation dead-code elimination (alloc/cleanup.py): an original pure definition
    whose value nothing reads may be written ``//@removed`` whatever it reads; a later read of
    it, a side effect (a volatile load) or a guarded definition is refuted."""
    (proof,) = prove(ORIG_DEAD, dead_alloc("//@removed add.s32\t%R1, %R0, 7;", *KEPT))
    assert proof.removed == 1
    # the removed value read afterwards
    refute(ORIG_DEAD, dead_alloc("//@removed add.s32\t%R1, %R0, 7;", KEPT[0], KEPT[1],
                                 store="%R1"),
           r"should hold %r1#\d+ but %R1 holds")
    refute(ORIG_DEAD, dead_alloc("add.s32 %R1, %R0, 7;", "//@removed ld.volatile.global.u32"
                                 "\t%R1, [%RD6+4];", KEPT[1]),
           r"is a 'ld.volatile.global.u32', which is not pure")
    refute(ORIG_DEAD, dead_alloc("add.s32 %R1, %R0, 7;", KEPT[0],
                                 "//@removed @%P0 add.s32\t%R1, %R0, 3;"),
           r"and is guarded")


def test_a_removed_line_defining_no_single_register_is_refuted():
    """Only a definition of one whole register may be written ``//@removed``: a store or a
    ``ret`` so written is refuted with its reason (it crashed the checker; review8c)."""
    good = dead_alloc("add.s32 %R1, %R0, 7;", *KEPT)
    prove(ORIG_DEAD, good)
    for line, removed in (("st.global.u32 [%RD6], %R0;", "st.global.u32\t[%RD6], %R0;"),
                          ("ret;", "ret;")):
        bad = good.replace("\t" + line, "\t//@removed " + removed, 1)
        assert bad != good
        refute(ORIG_DEAD, bad, r"does not define exactly one whole register")


def test_propagated_copy_use():
    """A read of an inserted copy's destination rewritten to read its source (copy
    propagation after allocation) is proven while the source still holds the value; rewritten
    to a register redefined since, it is refuted."""
    orig = kernel("""\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tadd.s32 %r2, %r1, 1;
\tst.global.u32 [%rd1], %r2;
\tst.global.u32 [%rd1+4], %r1;
\tret;""")

    def alloc(add_reads: str, last: str) -> str:
        return kernel(f"""\t.reg .b32 %R<2>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\tmov.b32 %R1, %R0; //@move %r1#1
\tadd.s32 %R0, {add_reads}, 1;
\tst.global.u32 [%RD6], %R0;
\tst.global.u32 [%RD6+4], {last};
\tret;""", K8)
    prove(orig, alloc("%R1", "%R1"))
    prove(orig, alloc("%R0", "%R1"))        # the add reads the copy's source
    refute(orig, alloc("%R0", "%R0"),       # R0 was redefined (with %r2) since
           r"operand 2 should hold %r1#1 but %R0 holds nothing; %r1#1 is in %R1")


def test_predicate_save_and_restore():
    orig = kernel("""\t.reg .pred %p<3>;
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tsetp.gt.s32 %p1, %r1, 10;
\tsetp.lt.s32 %p2, %r1, 3;
\tselp.b32 %r2, 1, 2, %p2;
\tselp.b32 %r3, %r2, 5, %p1;
\tst.global.u32 [%rd1], %r3;
\tret;""")
    body = """\t.reg .pred %P<1>;
\t.reg .b32 %R<3>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\tsetp.gt.s32 %P0, %R0, 10;
\tselp.u32\t%R1, 1, 0, %P0;\t//@pspill %p1#2
\tsetp.lt.s32 %P0, %R0, 3;
\tselp.b32 %R0, 1, 2, %P0;
\tsetp.ne.u32\t%P0, %R{home}, 0;\t//@preload %p1#2
\tselp.b32 %R0, %R0, 5, %P0;
\tst.global.u32 [%RD6], %R0;
\tret;"""
    (proof,) = prove(orig, kernel(body.format(home=1), K8))
    assert proof.inserted["pspill"] == proof.inserted["preload"] == 1
    refute(orig, kernel(body.format(home=0), K8),
           r"predicate restore of %p1#2 reads %R0, which holds \{%r2#\d+\}; %p1#2 is in %R1")


def test_predicates_only_p0_to_p6():
    orig = ORIG_GUARDED
    alloc = kernel("""\t.reg .pred %P<8>;
\t.reg .b32 %R<3>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\tsetp.gt.s32 %P7, %R0, 10;
\tmov.u32 %R1, 7;
\t@%P7 mov.u32 %R1, %R0;
\tst.global.u32 [%RD6], %R1;
\tret;""", K8)
    refute(orig, alloc, r"%P7 is not a predicate register \(only P0-P6 exist\)")


def test_two_definitions_of_one_instruction_in_one_place():
    orig = kernel("""\t.reg .pred %p<3>;
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\tsetp.gt.s32 %p1|%p2, %r1, 10;
\tselp.b32 %r2, 1, 2, %p2;
\tselp.b32 %r3, %r2, 5, %p1;
\tst.global.u32 [%rd1], %r3;
\tret;""")
    body = """\t.reg .pred %P<2>;
\t.reg .b32 %R<3>;
\t.reg .b64 %RD<8>;
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R0, [%RD6];
\tsetp.gt.s32 %P0|%P{q}, %R0, 10;
\tselp.b32 %R0, 1, 2, %P{q};
\tselp.b32 %R0, %R0, 5, %P0;
\tst.global.u32 [%RD6], %R0;
\tret;"""
    prove(orig, kernel(body.format(q=1), K8))
    refute(orig, kernel(body.format(q=0), K8), r"operand 4 should hold %p2#\d+ but %P0 holds "
                                               r"nothing")


def test_register_tuples():
    orig = kernel("""\t.reg .f32 %f<5>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
\tst.global.v4.f32 [%rd1], {%f4, %f3, %f2, %f1};
\tret;""")
    body = """\t.reg .b32 %R<16>;
\t.reg .b64 %RD<16>;
\tld.param.u64 %RD14, [k_p];
\tld.global.v4.f32 {{{a}}}, [%RD14];
\tmov.b32\t%R4, {d};\t//@move %f4#4
\tmov.b32\t%R5, {c};\t//@move %f3#3
\tmov.b32\t%R6, {b};\t//@move %f2#2
\tmov.b32\t%R7, {first};\t//@move %f1#1
\tst.global.v4.f32 [%RD14], {{%R4, %R5, %R6, %R7}};
\tret;"""
    k16 = "budget=16 arch=sm_90 stem="

    def alloc(*regs):
        first, b, c, d = regs
        return kernel(body.format(a=", ".join(regs), first=first, b=b, c=c, d=d), k16)
    (proof,) = prove(orig, alloc("%R0", "%R1", "%R2", "%R3"))
    assert proof.inserted["move"] == 4
    refute(orig, alloc("%R1", "%R0", "%R2", "%R3"),
           r"register tuple \{%R1, %R0, %R2, %R3\} is not consecutive: member 2 %R0 is out of "
           r"place")
    refute(orig, alloc("%R10", "%R11", "%R12", "%R13"),
           r"register tuple \{%R10, %R11, %R12, %R13\} is not aligned to 4 register")


# --- matching the original -------------------------------------------------------------------

def test_matching_refutations():
    good = line_alloc()
    refute(ORIG_LINE, good.replace("add.s32 %R0, %R0, 1;", "add.s32 %R0, %R0, 2;"),
           r"operand 3 differs from the original's '1'")
    refute(ORIG_LINE, good.replace("add.s32 %R0, %R0, 1;", "sub.s32 %R0, %R0, 1;"),
           r"expected the original instruction 'add.s32\t%r2, %r1, 1;' here")
    refute(ORIG_LINE, good.replace("\tadd.s32 %R0, %R0, 1;\n", ""),
           r"expected the original instruction")
    refute(ORIG_LINE, good.replace("\tret;", "\tadd.s32 %R0, %R0, 1;\n\tret;"),
           r"expected the original instruction 'ret;'|not in the original")
    refute(ORIG_LINE, good.replace("\tret;", "\tret;\n\tret;"), r"not in the original")
    refute(ORIG_LINE, good.replace("\tret;", "$L_extra:\n\tret;"), r"labels differ")
    refute(ORIG_LINE, good.replace("\tret;", "\tmov.b32 %R1, %R0;\t//@shuffle %r1#1\n\tret;"),
           r"unknown or malformed annotation '//@shuffle %r1#1'")


def test_unusable_input():
    with pytest.raises(CheckerInputError, match="no function carries a //@ptxalloc header"):
        prove(ORIG_LINE, ORIG_LINE)
    with pytest.raises(CheckerInputError, match="functions differ"):
        prove(ORIG_LINE, line_alloc().replace("entry k(", "entry other("))
    with pytest.raises(CheckerInputError, match="without a budget|budget"):
        prove(ORIG_LINE, line_alloc().replace("budget=8 ", ""))
    with pytest.raises(CheckerInputError, match="carries no //@ptxalloc header but differs"):
        two = ORIG_LINE + ORIG_LINE.split("\n", 3)[3].replace("entry k(", "entry k2(")
        alloc = line_alloc() + ORIG_LINE.split("\n", 3)[3].replace(
            "entry k(", "entry k2(").replace("add.s32 %r2, %r1, 1", "add.s32 %r2, %r1, 2")
        prove(two, alloc)


# --- old ABI, calling convention, asynchronous registers -------------------------------------

def test_pinned_old_abi_registers():
    orig = HDR + """.func (.reg .u32 %ret) f (.reg .u32 %a)
{
\t.reg .b32 %t;
\tmul.lo.u32 %t, %a, %a;
\tadd.u32 %ret, %t, %a;
\tret;
}
"""
    alloc = HDR + """.func (.reg .u32 %ret) f (.reg .u32 %a)
{
\t//@ptxalloc allocator=briggs budget=4 arch=sm_90 stem= abi=1 leaf=1
\t.reg .b32 %R<1>;
\tmul.lo.u32 %R0, %a, %a;
\tadd.u32 %ret, %R0, %a;
\tret;
}
"""
    prove(orig, alloc)
    refute(orig, alloc.replace("add.u32 %ret, %R0, %a;", "add.u32 %R0, %R0, %a;"),
           r"return parameter %ret should hold %ret#\d+ but %ret holds nothing")
    refute(orig, alloc.replace("mul.lo.u32 %R0, %a, %a;", "mul.lo.u32 %a, %a, %a;"),
           r"%a is a pinned \.reg parameter, it cannot hold %t#\d+")
    # the header may not drop abi=1 from a .func (its bindings would go unchecked)
    refute(orig, alloc.replace(" abi=1 leaf=1", ""),
           r"function 'f': the header lacks abi=1, but the calling convention applies")


CALLER = HDR + """.func (.param .b32 r) g(.param .b32 x)
{
\t.reg .b32 %r<2>;
\tld.param.u32 %r1, [x];
\tst.param.b32 [r], %r1;
\tret;
}
.visible .entry k(.param .u64 k_p)
{
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r1, [%rd1];
\t{
\t.param .b32 a;
\tst.param.b32 [a], %r1;
\t.param .b32 b;
\tcall.uni (b), g, (a);
\tld.param.b32 %r2, [b];
\t}
\tadd.s32 %r3, %r2, %r1;
\tst.global.u32 [%rd1], %r3;
\tret;
}
"""


def caller(saved: bool) -> str:
    save = ("\tst.local.b32\t[__ptxalloc_spill+0], %R1;\t//@save %r1#1\n" if saved else "")
    restore = ("\tld.local.b32\t%R1, [__ptxalloc_spill+0];\t//@restore %r1#1\n" if saved
               else "")
    return HDR + f""".func (.param .b32 r) g(.param .b32 x)
{{
\t//@ptxalloc allocator=briggs budget=8 arch=sm_90 stem= abi=1 leaf=1
\t.reg .b32 %R<1>;
\tld.param.u32 %R0, [x];
\tst.param.b32 [r], %R0;
\tret;
}}
.visible .entry k(.param .u64 k_p)
{{
\t//@ptxalloc allocator=briggs budget=8 arch=sm_90 stem= spill=__ptxalloc_spill frame=16 abi=1
\t.reg .b32 %R<2>;
\t.reg .b64 %RD<8>;
\t.local .align 16 .b8 __ptxalloc_spill[16];
\tld.param.u64 %RD6, [k_p];
\tld.global.u32 %R1, [%RD6];
\t{{
\t.param .b32 a;
\tmov.b32\t%R0, %R1;\t//@move %r1#1
\tst.param.b32 [a], %R0;
\t.param .b32 b;
\tst.local.b64\t[__ptxalloc_spill+8], %RD6;\t//@save %rd1#0
{save}\tcall.uni (b), g, (a);
{restore}\tld.local.b64\t%RD6, [__ptxalloc_spill+8];\t//@restore %rd1#0
\tld.param.b32 %R0, [b];
\t}}
\tadd.s32 %R0, %R0, %R1;
\tst.global.u32 [%RD6], %R0;
\tret;
}}
"""


def test_calls_destroy_caller_saved_registers():
    proofs = prove(CALLER, caller(True))
    assert proofs[1].inserted["save"] == proofs[1].inserted["restore"] == 2
    refute(CALLER, caller(False), r"operand 3 should hold %r1#1 but %R1 holds nothing")


CALLEE = HDR + """.func (.param .b32 r) g(.param .b32 x)
{
\t.reg .b32 %r<3>;
\tld.param.u32 %r1, [x];
\tadd.s32 %r2, %r1, 1;
\tst.param.b32 [r], %r2;
\tret;
}
"""


def callee(restore: bool) -> str:
    back = "\tld.local.b32\t%R24, [__ptxalloc_spill+0];\t//@crestore R24\n" if restore else ""
    return HDR + f""".func (.param .b32 r) g(.param .b32 x)
{{
\t//@ptxalloc allocator=briggs budget=32 arch=sm_90 stem= spill=__ptxalloc_spill frame=16 abi=1 leaf=1
\t.reg .b32 %R<25>;
\t.local .align 16 .b8 __ptxalloc_spill[16];
\tst.local.b32\t[__ptxalloc_spill+0], %R24;\t//@csave R24
\tld.param.u32 %R0, [x];
\tmov.b32\t%R24, %R0;\t//@move %r1#0
\tadd.s32 %R0, %R24, 1;
\tst.param.b32 [r], %R0;
{back}\tret;
}}
"""


def test_callee_saved_registers_come_back_at_ret():
    (proof,) = prove(CALLEE, callee(True))
    assert proof.inserted["csave"] == proof.inserted["crestore"] == 1
    refute(CALLEE, callee(False), r"'ret;'.*callee-saved R24 \(its value at entry\) should hold "
                                  r"R24@entry but %R24 holds nothing")
    refute(CALLEE, callee(True).replace("%R<25>", "%R<32>").replace(
        "add.s32 %R0, %R24, 1;", "add.s32 %R31, %R24, 1;").replace("[r], %R0", "[r], %R31"),
        r"%R31 uses R31, the frame pointer")


WGMMA = """\t.reg .f32 %f<5>;
\t.reg .b64 %rd<4>;
\t.reg .b32 %r<3>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u64 %rd2, [%rd1];
\tld.global.u64 %rd3, [%rd1+8];
\tmov.f32 %f1, 0f00000000;
\tmov.f32 %f2, 0f00000000;
\tmov.f32 %f3, 0f00000000;
\tmov.f32 %f4, 0f00000000;
\twgmma.fence.sync.aligned;
\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd2, %rd3, 1, 1, 1, 0, 0;
\twgmma.commit_group.sync.aligned;
\tld.global.u32 %r1, [%rd1+16];
\twgmma.wait_group.sync.aligned 0;
\tst.global.v4.f32 [%rd1], {%f1, %f2, %f3, %f4};
\tst.global.u32 [%rd1+16], %r1;
\tret;"""


def test_asynchronous_registers_stay_untouched_until_the_wait():
    orig = kernel(WGMMA)
    alloc = WGMMA.replace(".reg .f32 %f<5>;\n\t.reg .b64 %rd<4>;\n\t.reg .b32 %r<3>;",
                          ".reg .b32 %R<9>;\n\t.reg .b64 %RD<16>;")
    for i in range(1, 5):
        alloc = alloc.replace(f"%f{i}", f"%R{i - 1}")
    alloc = (alloc.replace("%rd1", "%RD10").replace("%rd2", "%RD12").replace("%rd3", "%RD14"))
    good = alloc.replace("%r1", "%R8")
    prove(orig, kernel(good, "budget=16 arch=sm_90 stem="))
    # the loaded value lands in the accumulator's R3 while the wgmma may still write it
    refute(orig, kernel(alloc.replace("%r1", "%R3"), "budget=16 arch=sm_90 stem="),
           r"writes %R3 while the asynchronous instruction of line \d+ still uses %R3 for "
           r"%f4#\d+ \(until wgmma.wait_group\)")


# --- emitter drift and the project's own PTX --------------------------------------------------

def test_emitter_drift_is_caught():
    path = DATA / "pressure_sm80.ptx"
    module = parse_file(str(path))
    result = allocate_module(module, 15, verify=False)
    verify_module_text(module, result.ptx, result.functions)
    assert all(f.verified for f in result.functions)
    fr = result.functions[0]
    parsed = parse_allocated(result.ptx).function(fr.name)
    check_no_drift(parsed, fr.function, fr.names)
    names = list(fr.names)
    victim = next(s for s in fr.function.body if type(s).__name__ == "Instruction" and s.defs)
    names[victim.defs[0]] = "%R14" if names[victim.defs[0]] != "%R14" else "%R13"
    with pytest.raises(VerificationError, match="emitter drift"):
        check_no_drift(parsed, fr.function, names)


def test_blocks_match_the_cfg():
    from ptxalloc.ir.cfg import CFG
    for path in sorted(DATA.glob("**/*.ptx")):
        for fn in parse_file(str(path)).functions:
            mine = Blocks(fn.body, fn.branch_targets)
            cfg = CFG(fn)
            assert mine.n == len(cfg.blocks)
            assert mine.succs == [b.succs for b in cfg.blocks], (path, fn.name)
            assert mine.rpo == cfg.rpo


FILES = sorted(DATA.glob("*.ptx")) + sorted((DATA / "hand").glob("*.ptx"))


@pytest.mark.parametrize("budget", [4, 15, 255])
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_allocation_of_the_project_ptx_is_proven(path, budget):
    """Through ``allocate`` (which verifies) and through the two-file checker: proven, or the
    allocation refused."""
    module = parse_file(str(path))
    for fn in module.functions:
        try:
            result = allocate_module(module, budget, function=fn.name, verify=False)
        except AllocationError as e:
            assert_justified_refusal(str(e), budget)
            continue
        verify_module_text(module, result.ptx, result.functions)
        assert result.functions[0].verified is True
        verify_modules(module, parse_allocated(result.ptx))


TCGEN05_RED = """\t.reg .b32 %r<6>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_p];
\tld.global.u32 %r4, [%rd1];
\ttcgen05.ld.red.sync.aligned.32x32b.x2.min.f32 {%r1, %r2}, %r3, [%r4];
\tld.global.u32 %r5, [%rd1+4];
\ttcgen05.wait::ld.sync.aligned;
\tst.global.u32 [%rd1], %r1;
\tst.global.u32 [%rd1+4], %r2;
\tst.global.u32 [%rd1+8], %r5;
\tret;"""


def test_tcgen05_ld_red_keeps_its_scalar_redval_in_flight():
    """redval, a scalar destination of tcgen05.ld.red, is written asynchronously like the
    vector: no other value may take its register before tcgen05.wait::ld, even when redval
    itself is never read."""
    orig = kernel(TCGEN05_RED)
    alloc = TCGEN05_RED.replace(".reg .b32 %r<6>;\n\t.reg .b64 %rd<2>;",
                                ".reg .b32 %R<7>;\n\t.reg .b64 %RD<5>;")
    for old, new in (("%r1", "%R0"), ("%r2", "%R1"), ("%r3", "%R2"), ("%r4", "%R3"),
                     ("%rd1", "%RD4")):
        alloc = alloc.replace(old, new)
    prove(orig, kernel(alloc.replace("%r5", "%R6"), "budget=8 arch=sm_100 stem="))
    refute(orig, kernel(alloc.replace("%r5", "%R2"), "budget=8 arch=sm_100 stem="),
           r"writes %R2 while the asynchronous instruction of line \d+ still uses %R2 for "
           r"%r3#\d+ \(until tcgen05.wait::ld\)")
