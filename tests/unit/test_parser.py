"""The PTX parser (issue 2): every syntax feature, the registers and operands it builds, the
defs/uses the ISA table gives a handful of instructions, and the errors malformed input raises
(file, line, column and a caret snippet)."""

from __future__ import annotations

import re

import pytest

from conftest import DATA
from ptxalloc.errors import PtxSyntaxError
from ptxalloc.ir.instruction import COMMENT, DIRECTIVE, LOC, REG_DECL, SCOPE_CLOSE, SCOPE_OPEN
from ptxalloc.ir.module import Function, Instruction, Label, Raw
from ptxalloc.ir.operands import Args, Imm, Mem, Not, Pair, Reg, Sink, Sym, Vec
from ptxalloc.ir.registers import RegClass
from ptxalloc.ptx import parse, parse_file

# One module with every construct of issue 2. Line numbers matter to some tests: keep the
# text's first line the '// features' comment.
FEATURES = r"""// features.ptx: every construct the parser must read
.version 8.0
.target sm_80
.address_size 64

.global .align 4 .u32 gtable[4] = {1, 2, 3, 4};
.const .align 8 .f64 cone = 0d3FF0000000000000;
.shared .align 16 .b8 sbuf[256];
.extern .func (.param .b32 ext_ret) ext_f (.param .b32 ext_a);
/* a block comment
   spanning two lines */
.section .debug_abbrev
{
.b8 1
.b8 17
}

.weak .func (.param .b32 wret) weak_f (.param .b32 wa, .param .align 8 .b8 wbuf[16])
{
	.reg .b32 %r<3>;
	ld.param.u32 %r1, [wa];
	st.param.b32 [wret], %r1;
	ret;
}

.func (.reg .u32 %oret) old_f (.reg .u32 %oa, .reg .u32 %ob)
{
	add.u32 %oret, %oa, %ob;
	ret;
}

.visible .entry kmain(.param .u64 kmain_out, .param .u32 kmain_n)
.maxntid 128, 1, 1
.minnctapersm 2
.maxnreg 64
{
	.reg .pred %p<4>;
	.reg .b32 %r<100>, %s1, %s2;
	.reg .b64 %rd<10>;
	.reg .v4 .u32 v;
	.reg .f32 %f<5>;
	.reg .f64 %fd<3>;
	.local .align 4 .b8 __local_depot[32];
	.shared .align 4 .b32 sarr[64];
	.param .b32 pp[2];
	.loc 1 10 3
	ld.param.u64 %rd1, [kmain_out];
	.file 2 "features.cu"
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %laneid;
L_top: add.s32 %r3, %r1, -4;
	@%p1 bra L_top;
	@!%p2 bra L_top;
	ld.shared::cta.u32 %r4, [sarr+4];
	ld.global.u32 %r5, [%rd1+8];
	ld.global.u32 %r6, [%rd1+-4];
	ld.global.u32 %r7, [%rd1 + 8];
	mov.f32 %f1, 0f3F800000;
	mov.f64 %fd1, 0d3FF0000000000000;
	mov.u32 %r8, 0x10;
	mov.u32 %r9, ((128 >> 4) << 16);
	mov.u32 v.x, %r1;
	add.u32 %r10, v.y, 1;
	setp.lt.s32 %p1|%p2, %r1, %r2;
	and.pred %p3, %p1, !%p2;
	shfl.sync.down.b32 %r11|%p3, %r1, 1, 31, -1;
	ld.global.v4.u32 {%r12, %r13, %r14, _}, [%rd1];
	st.global.v2.u32 [%rd1], {%r12, %r13};
	atom.global.add.u32 %r15, [%rd1], %r1;
	add.s32 %r16, %r1, 1; // trailing comment
	/* inline */ add.s32 %r17, %r1, 2; /* two
	lines */
	@%p3 add.s32 %r18, %r17, %r16;
	{
	.reg .b32 %r1;
	.reg .b64 %t;
	mov.u32 %r1, 7;
	cvt.u64.u32 %t, %r1;
		{
		.reg .b32 %t;
		add.u32 %t, %r1, 1;
		mov.u32 %r19, %t;
		}
	cvt.u32.u64 %r20, %t;
	}
	add.u32 %r21, %r1, %r20;
	call (%r22), old_f, (%r21, %r19);
	call (%r23), old_f, (%r22, 7);
	{ // callseq 0
	.param .b32 param0;
	st.param.b32 [param0], %r23;
	.param .b32 retval0;
	call.uni (retval0), weak_f, (param0);
	ld.param.b32 %r24, [retval0];
	}
	{ // callseq 1
	.param .b32 param0;
	st.param.b32 [param0], %r24;
	.param .b32 retval0;
	proto_1 : .callprototype (.param .b32 _) _ (.param .b32 _);
	call (retval0),
	%rd1,
	(
	param0
	)
	, proto_1;
	ld.param.b32 %r25, [retval0];
	}
	and.b32 %r26, %r25, 1;
	$Ltab: .branchtargets L_a, L_b;
	brx.idx %r26, $Ltab;
L_a:
	st.global.u32 [%rd1+4], %r25;
L_b:
	exit;
}

.visible .entry kreq() .reqntid 32, 4
{
	ret;
}

.entry kprag .pragma "nounroll";
{
	.pragma "nounroll";
	ret;
}
"""


@pytest.fixture(scope="module")
def mod():
    return parse(FEATURES, "features.ptx")


@pytest.fixture(scope="module")
def kmain(mod):
    return mod.function("kmain")


def line_of(text: str, needle: str, nth: int = 0) -> int:
    """1-based line of the nth occurrence of ``needle`` in ``text``."""
    pos = -1
    for _ in range(nth + 1):
        pos = text.index(needle, pos + 1)
    return text.count("\n", 0, pos) + 1


def instr_at(fn: Function, needle: str, nth: int = 0) -> Instruction:
    """The instruction on the line of the nth occurrence of ``needle`` in FEATURES."""
    line = line_of(FEATURES, needle, nth)
    found = [s for s in fn.instructions() if s.line == line]
    assert len(found) == 1, (needle, line, found)
    return found[0]


def names(fn: Function, ids) -> list[str]:
    return [fn.regs.names[v] for v in ids]


def render(fn: Function, ins: Instruction) -> str:
    return ins.render(fn.regs.names.__getitem__)


# --- module scope -----------------------------------------------------------------------------


def test_version_target_address_size(mod):
    assert mod.version == "8.0"
    assert mod.target == ["sm_80"]
    assert mod.address_size == 64
    assert mod.sm == "sm_80"
    assert mod.filename == "features.ptx"


def test_target_with_options():
    m = parse(".version 7.0\n.target sm_90a, debug\n.address_size 32\n")
    assert m.target == ["sm_90a", "debug"]
    assert m.sm == "sm_90a"
    assert m.address_size == 32
    assert m.functions == []


def test_module_scope_declarations_kept_verbatim(mod):
    raws = [it.text for it in mod.items if type(it) is Raw]
    assert ".global .align 4 .u32 gtable[4] = {1, 2, 3, 4};" in raws
    assert ".const .align 8 .f64 cone = 0d3FF0000000000000;" in raws
    assert ".shared .align 16 .b8 sbuf[256];" in raws
    assert ".extern .func (.param .b32 ext_ret) ext_f (.param .b32 ext_a);" in raws
    assert "/* a block comment\n   spanning two lines */" in raws
    section = [t for t in raws if t.startswith(".section")]
    assert len(section) == 1 and section[0].endswith("}") and ".b8 17" in section[0]
    # the order of the file is kept: header lines first, then declarations, then functions
    kinds = [type(it).__name__ for it in mod.items]
    assert kinds.index("Function") > raws.index(".shared .align 16 .b8 sbuf[256];")


def test_functions_kinds_and_linkage(mod):
    fns = {f.name: f for f in mod.functions}
    assert list(fns) == ["weak_f", "old_f", "kmain", "kreq", "kprag"]
    assert fns["weak_f"].kind == "func" and fns["weak_f"].linkage == [".weak"]
    assert fns["kmain"].kind == "entry" and fns["kmain"].is_entry
    assert fns["kmain"].linkage == [".visible"]
    assert fns["old_f"].linkage == []
    # the .extern declaration is no function definition
    assert mod.function("ext_f") is None


def test_param_and_return_lists(mod):
    w = mod.function("weak_f")
    assert [(p.name, p.space, p.ptype, p.size, p.align, p.is_return) for p in w.returns] == [
        ("wret", "param", ".b32", 4, 0, True)]
    assert [(p.name, p.space, p.ptype, p.size, p.align) for p in w.params] == [
        ("wa", "param", ".b32", 4, 0), ("wbuf", "param", ".b8", 16, 8)]
    k = mod.function("kmain")
    assert [(p.name, p.ptype, p.size) for p in k.params] == [
        ("kmain_out", ".u64", 8), ("kmain_n", ".u32", 4)]
    assert k.returns == []


def test_old_abi_register_parameters_are_registers(mod):
    f = mod.function("old_f")
    assert [(p.name, p.space) for p in f.returns] == [("%oret", "reg")]
    assert [(p.name, p.space) for p in f.params] == [("%oa", "reg"), ("%ob", "reg")]
    for p in f.returns + f.params:
        assert p.vid >= 0 and f.regs.names[p.vid] == p.name
        assert f.regs.classes[p.vid] == RegClass.GPR32
    add = f.instructions()[0]
    assert names(f, add.defs) == ["%oret"]
    assert names(f, add.uses) == ["%oa", "%ob"]


def test_performance_directives(mod):
    assert mod.function("kmain").directives == {"maxntid": [128, 1, 1], "minnctapersm": 2,
                                                "maxnreg": 64}
    assert mod.function("kreq").directives == {"reqntid": [32, 4]}


def test_pragma_in_header_and_body(mod):
    """The PTX ISA's own example: ``.entry foo .pragma "nounroll"; { ... }``."""
    f = mod.function("kprag")
    assert f.directives.get("pragma") == ['"nounroll"']
    assert f.header.rstrip().endswith('.pragma "nounroll";')
    assert [s.text for s in f.body if type(s) is Raw] == ['.pragma "nounroll";']
    assert [i.opcode for i in f.instructions()] == ["ret"]


# --- declarations -----------------------------------------------------------------------------


def test_reg_ranges_lists_and_types(kmain):
    regs = kmain.regs
    by_name = {n: v for v, n in enumerate(regs.names)}
    # only referenced registers get ids, in order of first reference
    assert regs.names[0] == "%rd1"
    assert regs.types[by_name["%rd1"]] == ".b64"
    assert regs.classes[by_name["%rd1"]] == RegClass.GPR64
    assert regs.classes[by_name["%p1"]] == RegClass.PRED
    assert regs.classes[by_name["%f1"]] == RegClass.GPR32
    assert regs.classes[by_name["%fd1"]] == RegClass.GPR64
    assert "%r0" not in by_name and "%s1" not in by_name      # declared, never referenced
    # every register id is used by some instruction or guard
    used = set()
    for ins in kmain.instructions():
        used.update(ins.defs)
        used.update(ins.uses)
    assert used == set(range(len(regs)))


def test_reg_range_bounds():
    body = ".reg .b32 %r<3>, %x;\n\tmov.u32 %r0, 1;\n\tmov.u32 %r2, %r0;\n\tmov.u32 %x, %r2;\n"
    f = parse(kernel(body)).functions[0]
    assert f.regs.names == ["%r0", "%r2", "%x"]
    with pytest.raises(PtxSyntaxError, match="'%r3' is not a declared register"):
        parse(kernel(".reg .b32 %r<3>;\n\tmov.u32 %r3, 1;\n"))


def test_vector_register_and_components(kmain):
    regs = kmain.regs
    v = regs.lookup("v")
    assert regs.vec[v] == 4 and regs.types[v] == ".u32" and regs.classes[v] == RegClass.GPR32
    mov = instr_at(kmain, "mov.u32 v.x")
    assert mov.ops[0] == Reg(v, ".x")
    # a write to one component is a partial definition: v is defined and used
    assert mov.defs == (v,)
    assert set(mov.uses) == {v, regs.lookup("%r1")}
    add = instr_at(kmain, "add.u32 %r10, v.y")
    assert add.ops[1] == Reg(v, ".y")
    assert v in add.uses and v not in add.defs
    assert render(kmain, add) == "add.u32\t%r10, v.y, 1;"


def test_function_scope_state_space_declarations(kmain):
    directives = [s.text for s in kmain.body if type(s) is Raw and s.kind == DIRECTIVE]
    assert ".local .align 4 .b8 __local_depot[32];" in directives
    assert ".shared .align 4 .b32 sarr[64];" in directives
    assert ".param .b32 pp[2];" in directives
    decls = [s.text for s in kmain.body if type(s) is Raw and s.kind == REG_DECL]
    assert ".reg .v4 .u32 v;" in decls
    assert ".reg .b32 %r<100>, %s1, %s2;" in decls


# --- labels, guards, opcodes ------------------------------------------------------------------


def test_label_followed_by_instruction_on_one_line(kmain):
    body = kmain.body
    k = next(i for i, s in enumerate(body) if type(s) is Label and s.name == "L_top")
    nxt = body[k + 1]
    assert type(nxt) is Instruction and nxt.opcode == "add.s32"
    assert body[k].line == nxt.line == line_of(FEATURES, "L_top: add.s32")
    assert [s.name for s in kmain.labels()] == ["L_top", "L_a", "L_b"]


def test_guards(kmain):
    p1, p2 = kmain.regs.lookup("%p1"), kmain.regs.lookup("%p2")
    g = instr_at(kmain, "@%p1 bra L_top")
    assert (g.guard, g.guard_neg) == (p1, False) and g.uses == (p1,) and g.defs == ()
    assert g.ops == [Sym("L_top")]
    n = instr_at(kmain, "@!%p2 bra L_top")
    assert (n.guard, n.guard_neg) == (p2, True) and n.uses == (p2,)
    assert render(kmain, n) == "@!%p2 bra\tL_top;"
    # a guarded computation: the guard is a use, besides the sources
    a = instr_at(kmain, "@%p3 add.s32 %r18")
    assert names(kmain, a.defs) == ["%r18"]
    assert set(names(kmain, a.uses)) == {"%r17", "%r16", "%p3"}


def test_opcode_with_double_colon_modifier(kmain):
    ld = instr_at(kmain, "ld.shared::cta.u32")
    assert ld.opcode == "ld.shared::cta.u32" and ld.base == "ld"
    assert ld.ops[1] == Mem(Sym("sarr"), "+4")
    assert names(kmain, ld.defs) == ["%r4"] and ld.uses == ()


# --- operands ---------------------------------------------------------------------------------


@pytest.mark.parametrize("needle, operand, text", [
    ("ld.global.u32 %r5", lambda r: Mem(Reg(r("%rd1")), "+8"), "[%rd1+8]"),
    ("ld.global.u32 %r6", lambda r: Mem(Reg(r("%rd1")), "+-4"), "[%rd1+-4]"),
    ("ld.global.u32 %r7", lambda r: Mem(Reg(r("%rd1")), "+8"), "[%rd1+8]"),
    ("ld.param.u64 %rd1", lambda r: Mem(Sym("kmain_out")), "[kmain_out]"),
    ("mov.f32 %f1", lambda r: Imm("0f3F800000"), "0f3F800000"),
    ("mov.f64 %fd1", lambda r: Imm("0d3FF0000000000000"), "0d3FF0000000000000"),
    ("mov.u32 %r8", lambda r: Imm("0x10"), "0x10"),
    ("mov.u32 %r9", lambda r: Imm("((128 >> 4) << 16)"), "((128 >> 4) << 16)"),
    ("mov.u32 %r1, %tid.x", lambda r: Sym("%tid.x"), "%tid.x"),
    ("mov.u32 %r2, %laneid", lambda r: Sym("%laneid"), "%laneid"),
])
def test_second_operand(kmain, needle, operand, text):
    ins = instr_at(kmain, needle)
    assert ins.ops[1] == operand(kmain.regs.lookup)
    assert ins.ops[1].render(kmain.regs.names.__getitem__) == text


def test_negative_immediate(kmain):
    ins = instr_at(kmain, "L_top: add.s32")
    assert ins.ops[2] == Imm("-4")
    assert names(kmain, ins.uses) == ["%r1"]


def test_special_registers_are_not_virtual_registers(kmain):
    assert not any(n.startswith(("%tid", "%laneid")) for n in kmain.regs.names)
    assert instr_at(kmain, "mov.u32 %r1, %tid.x").uses == ()


def test_vector_and_sink_operands(kmain):
    r = kmain.regs.lookup
    ld = instr_at(kmain, "ld.global.v4.u32")
    assert ld.ops[0] == Vec([Reg(r("%r12")), Reg(r("%r13")), Reg(r("%r14")), Sink()])
    assert names(kmain, ld.defs) == ["%r12", "%r13", "%r14"]
    assert names(kmain, ld.uses) == ["%rd1"]
    st = instr_at(kmain, "st.global.v2.u32")
    assert st.ops[1] == Vec([Reg(r("%r12")), Reg(r("%r13"))])
    assert st.defs == ()
    assert names(kmain, st.uses) == ["%rd1", "%r12", "%r13"]


def test_setp_pair_defines_two_predicates(kmain):
    s = instr_at(kmain, "setp.lt.s32 %p1|%p2")
    assert isinstance(s.ops[0], Pair)
    assert names(kmain, s.defs) == ["%p1", "%p2"]
    assert names(kmain, s.uses) == ["%r1", "%r2"]
    assert render(kmain, s) == "setp.lt.s32\t%p1|%p2, %r1, %r2;"


def test_negated_predicate_operand(kmain):
    r = kmain.regs.lookup
    ins = instr_at(kmain, "and.pred %p3")
    assert ins.ops[2] == Not(Reg(r("%p2")))
    assert names(kmain, ins.defs) == ["%p3"]
    assert names(kmain, ins.uses) == ["%p1", "%p2"]
    assert render(kmain, ins) == "and.pred\t%p3, %p1, !%p2;"


def test_shfl_sync_defines_register_and_predicate(kmain):
    s = instr_at(kmain, "shfl.sync.down.b32")
    assert names(kmain, s.defs) == ["%r11", "%p3"]
    assert names(kmain, s.uses) == ["%r1"]
    assert s.ops[2:] == [Imm("1"), Imm("31"), Imm("-1")]


def test_atom_defines_destination_uses_the_rest(kmain):
    a = instr_at(kmain, "atom.global.add.u32")
    assert names(kmain, a.defs) == ["%r15"]
    assert names(kmain, a.uses) == ["%rd1", "%r1"]


def test_call_old_abi_registers(kmain):
    c = instr_at(kmain, "call (%r22), old_f")
    assert c.ops[0] == Args([Reg(kmain.regs.lookup("%r22"))])
    assert c.ops[1] == Sym("old_f")
    assert names(kmain, c.defs) == ["%r22"]
    assert names(kmain, c.uses) == ["%r21", "%r19"]
    c2 = instr_at(kmain, "call (%r23), old_f")
    assert names(kmain, c2.defs) == ["%r23"]
    assert names(kmain, c2.uses) == ["%r22"]
    assert c2.ops[2] == Args([Reg(kmain.regs.lookup("%r22")), Imm("7")])


def test_call_param_abi_touches_no_register(kmain):
    c = instr_at(kmain, "call.uni (retval0), weak_f")
    assert c.ops == [Args([Sym("retval0")]), Sym("weak_f"), Args([Sym("param0")])]
    assert c.defs == () and c.uses == ()


def test_indirect_call_with_callprototype(kmain):
    proto = [s for s in kmain.body if type(s) is Raw and ".callprototype" in s.text]
    assert [s.text for s in proto] == [
        "proto_1: .callprototype (.param .b32 _) _ (.param .b32 _);"]
    c = instr_at(kmain, "call (retval0),")
    assert c.opcode == "call"
    assert c.ops[1] == Reg(kmain.regs.lookup("%rd1"))
    assert c.ops[3] == Sym("proto_1")
    assert names(kmain, c.uses) == ["%rd1"] and c.defs == ()
    # the statement spans seven lines; it is reported at its first
    assert c.line == line_of(FEATURES, "call (retval0),")


def test_brx_idx_and_branchtargets(kmain):
    assert kmain.branch_targets == {"$Ltab": ["L_a", "L_b"]}
    b = instr_at(kmain, "brx.idx %r26")
    assert names(kmain, b.uses) == ["%r26"] and b.defs == ()
    assert b.ops[1] == Sym("$Ltab")
    raw = [s.text for s in kmain.body if type(s) is Raw and ".branchtargets" in s.text]
    assert raw == ["$Ltab: .branchtargets L_a, L_b;"]


# --- .loc, .file, comments --------------------------------------------------------------------


def test_loc_and_file_end_at_newline(kmain):
    locs = [s for s in kmain.body if type(s) is Raw and s.kind == LOC]
    assert [s.text for s in locs] == [".loc 1 10 3", '.file 2 "features.cu"']
    assert [s.line for s in locs] == [line_of(FEATURES, ".loc 1 10 3"),
                                      line_of(FEATURES, '.file 2 "features.cu"')]
    # the statement after a .loc (no ';' in between) is an instruction of its own
    ld = instr_at(kmain, "ld.param.u64 %rd1")
    assert ld.loc == (1, 10, 3, None)
    assert instr_at(kmain, "mov.u32 %r1, %tid.x").loc == (1, 10, 3, None)


def test_comments(kmain, mod):
    comments = [s.text for s in kmain.body if type(s) is Raw and s.kind == COMMENT]
    trailing = instr_at(kmain, "add.s32 %r16")
    # a trailing comment is kept, either on its instruction or as a statement of its own
    assert "// trailing comment" in comments + [trailing.comment]
    assert "/* inline */" in comments
    assert "/* two\n\tlines */" in comments
    # the instruction between the two block comments is parsed
    ins = instr_at(kmain, "add.s32 %r17")
    assert names(kmain, ins.defs) == ["%r17"]
    # the function after the multi-line comment still has its right line numbers
    assert instr_at(kmain, "@%p3 add.s32 %r18").line == line_of(FEATURES, "@%p3 add.s32")


def test_comment_inside_operand_list_and_loc_without_semicolon():
    text = kernel(".reg .b32 %r<4>;\n"
                  "\tmov.u32 %r1, 1;\n"
                  "\t.loc 1 5 2\n"
                  "\tadd.s32 %r2, /* the first */ %r1, // and\n"
                  "\t\t%r1;\n"
                  "\t.loc 1 6 0\n"
                  "\tmov.u32 %r3, %r2;\n")
    f = parse(text).functions[0]
    add = f.instructions()[1]
    assert add.opcode == "add.s32"
    assert names(f, add.defs) == ["%r2"] and names(f, add.uses) == ["%r1"]
    assert add.loc == (1, 5, 2, None)
    assert f.instructions()[2].loc == (1, 6, 0, None)


# --- scopes -----------------------------------------------------------------------------------


def test_nested_scopes_shadowing_gives_distinct_ids(kmain):
    regs = kmain.regs
    ids_r1 = [v for v, n in enumerate(regs.names) if n == "%r1"]
    ids_t = [v for v, n in enumerate(regs.names) if n == "%t"]
    assert len(ids_r1) == 2 and len(ids_t) == 2
    outer_r1, inner_r1 = ids_r1
    t64, t32 = ids_t
    assert regs.types[t64] == ".b64" and regs.types[t32] == ".b32"
    mov7 = instr_at(kmain, "mov.u32 %r1, 7")
    assert mov7.defs == (inner_r1,)
    cvt = instr_at(kmain, "cvt.u64.u32 %t")
    assert cvt.defs == (t64,) and cvt.uses == (inner_r1,)
    add = instr_at(kmain, "add.u32 %t, %r1, 1")
    assert add.defs == (t32,) and add.uses == (inner_r1,)
    back = instr_at(kmain, "cvt.u32.u64 %r20, %t")          # the inner scope has closed
    assert back.uses == (t64,)
    after = instr_at(kmain, "add.u32 %r21, %r1, %r20")      # both scopes closed
    assert after.uses[0] == outer_r1
    kinds = [s.kind for s in kmain.body if type(s) is Raw and s.kind in (SCOPE_OPEN,
                                                                         SCOPE_CLOSE)]
    assert kinds == [SCOPE_OPEN, SCOPE_OPEN, SCOPE_CLOSE, SCOPE_CLOSE] * 1 + [
        SCOPE_OPEN, SCOPE_CLOSE, SCOPE_OPEN, SCOPE_CLOSE]


def test_hand_scopes_file():
    f = parse_file(str(DATA / "hand" / "scopes.ptx")).functions[0]
    regs = f.regs
    r1 = [v for v, n in enumerate(regs.names) if n == "%r1"]
    p1 = [v for v, n in enumerate(regs.names) if n == "%p1"]
    assert len(r1) == 2 and len(p1) == 2
    last_setp = [i for i in f.instructions() if i.opcode.startswith("setp")][-1]
    assert last_setp.defs == (p1[1],) and last_setp.uses == (r1[0],)
    first_setp = [i for i in f.instructions() if i.opcode.startswith("setp")][0]
    assert first_setp.defs == (p1[0],) and first_setp.uses == (r1[1],)


def test_vectors_file_shadowed_predicate_in_bar_red():
    """k_shared's ``.reg .pred %p1;`` inside the __syncthreads_count scope shadows %p1."""
    m = parse_file(str(DATA / "vectors_sm80.ptx"))
    f = next(fn for fn in m.functions if "k_shared" in fn.name)
    p1 = [v for v, n in enumerate(f.regs.names) if n == "%p1"]
    assert len(p1) == 2
    bar = next(i for i in f.instructions() if i.opcode.startswith("bar.red.popc"))
    assert bar.defs and f.regs.classes[bar.defs[0]] == RegClass.GPR32


# --- real files -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(DATA.glob("**/*.ptx")), ids=lambda p: p.name)
def test_data_files_parse(path):
    m = parse_file(str(path))
    assert m.functions
    text = path.read_text()
    for f in m.functions:
        assert f.filename == str(path)
        n_text = len(re.findall(r"\.(?:entry|func)\b[^;{]*\{", text))
        assert n_text >= 1
        for ins in f.instructions():
            assert ins.line > 0
            assert all(0 <= v < len(f.regs) for v in ins.defs + ins.uses)
    assert len(m.functions) == len(re.findall(r"^(?:\.\w+\s+)*\.(?:entry|func)\b[^;]*?\{",
                                              text, re.M | re.S))


# --- errors -----------------------------------------------------------------------------------

HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"
MARK = "\u00a4"          # marks where the error must be reported; removed before parsing


def kernel(body: str, header: str = ".visible .entry k(.param .u64 k_p)") -> str:
    return HDR + header + "\n{\n\t" + body + "\tret;\n}\n"


def _marked(text: str) -> tuple[str, int, int, str]:
    pos = text.index(MARK)
    clean = text.replace(MARK, "")
    line = text.count("\n", 0, pos) + 1
    start = text.rfind("\n", 0, pos) + 1
    end = clean.find("\n", start)
    return clean, line, pos - start + 1, clean[start:end if end >= 0 else len(clean)]


ERROR_CASES = {
    "unterminated body": (HDR + ".visible .entry k()\n{\n\t.reg .b32 %r<3>;\n"
                          "\tmov.u32 %r1, 1;\u00a4\n", "function 'k' opened at 6:1 is not closed"),
    "unbalanced bracket": (kernel(".reg .b32 %r<3>;\n\t.reg .b64 %rd<3>;\n"
                                  "\tld.global.u32 %r1, \u00a4[%rd1+8;\n"), "unbalanced"),
    "unbalanced brace": (kernel(".reg .b32 %r<3>;\n\t.reg .b64 %rd<3>;\n"
                                "\tst.global.v2.u32 [%rd1], \u00a4{%r1, %r2;\n"), "unbalanced"),
    "undeclared register": (kernel(".reg .b32 %r<3>;\n\tadd.s32 %r1, %r2, \u00a4%r9;\n"),
                            "'%r9' is not a declared register"),
    "undeclared register, prefix of a declared one": (
        kernel(".reg .b32 %r<100>;\n\tadd.s32 %r1, %r99, %r1;\n"
               "\tadd.s32 %r1, %r99, \u00a4%r100;\n"), "'%r100' is not a declared register"),
    "bad reg type": (kernel(".reg \u00a4.b33 %r<3>;\n"), "'.b33' is not a register type"),
    "branch to unknown label": (kernel(".reg .pred %p1;\n\tsetp.eq.u32 %p1, 1, 1;\n"
                                       "\t@%p1 bra \u00a4$L_nowhere;\n"),
                                "unknown label '$L_nowhere'"),
    "unguarded branch to unknown label": (kernel("bra.uni \u00a4L_x;\nL_y:\n"),
                                          "unknown label 'L_x'"),
    "guard with undeclared predicate": (kernel(".reg .b32 %r<3>;\n"
                                               "\t@\u00a4%p7 mov.u32 %r1, 1;\n"),
                                        "'%p7' is not a declared predicate"),
    "guard that is not a predicate": (kernel(".reg .b32 %r<3>;\n"
                                             "\t@!\u00a4%r2 mov.u32 %r1, 1;\n"),
                                      "'%r2' is not a declared predicate"),
    "garbage at module scope": (HDR + "\u00a4hello world;\n", "unexpected 'hello'"),
    "garbage after a function": (kernel("") + "\n  \u00a442 bogus\n", "unexpected '42'"),
    "empty statement": (kernel("mov.u64 %rd1, 0;\n\t\u00a4;\n").replace(
        "{\n\t", "{\n\t.reg .b64 %rd1;\n\t"), "empty statement"),
    "undeclared register in a multi-line statement": (
        kernel(".reg .b32 %r<3>;\n\tadd.s32 %r1,\n\t\t%r2,\n\t\t\u00a4%q1;\n"),
        "'%q1' is not a declared register"),
    "unknown brx.idx table": (kernel(".reg .b32 %r<3>;\n\tmov.u32 %r1, 0;\n"
                                     "\tbrx.idx %r1, \u00a4$T;\n"), "unknown target list"),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_syntax_errors_have_line_column_and_snippet(case):
    marked, fragment = ERROR_CASES[case]
    text, line, column, source_line = _marked(marked)
    with pytest.raises(PtxSyntaxError) as info:
        parse(text, "bad.ptx")
    e = info.value
    assert fragment in e.message
    assert (e.filename, e.line, e.column) == ("bad.ptx", line, column), str(e)
    assert e.source_line == source_line
    assert str(e).startswith(f"bad.ptx:{line}:{column}: syntax error: ")
    assert "\n" not in str(e)
    snip = e.snippet().split("\n")
    assert snip[0] == source_line.expandtabs(1)
    assert snip[1] == " " * (column - 1) + "^"


def test_error_message_is_one_line_for_multiline_statement():
    text = kernel(".reg .b32 %r<3>;\n\tadd.s32 %r1,\n\t\t%r2 %r2,\n\t\t(%r1;\n")
    with pytest.raises(PtxSyntaxError) as info:
        parse(text, "bad.ptx")
    assert "\n" not in str(info.value)


def test_non_utf8_file(tmp_path):
    p = tmp_path / "latin1.ptx"
    p.write_bytes(b".version 7.0\n.target sm_80\n// caf\xe9 au lait\n")
    with pytest.raises(PtxSyntaxError) as info:
        parse_file(str(p))
    e = info.value
    assert (e.filename, e.line, e.column) == (str(p), 3, 7)
    assert "UTF-8" in e.message
    snip = e.snippet().split("\n")
    assert snip[0].startswith("// caf")
    assert snip[1] == " " * 6 + "^"


def test_unreadable_file_is_a_usage_error(tmp_path):
    from ptxalloc.errors import UsageError
    with pytest.raises(UsageError):
        parse_file(str(tmp_path / "missing.ptx"))


def test_data_file_with_inserted_error_reports_its_line():
    """An undeclared register planted deep in a real file is reported at its own line."""
    path = DATA / "calls_sm80.ptx"
    lines = path.read_text().split("\n")
    k = next(i for i, ln in enumerate(lines) if "add.s32" in ln and i > 100)
    lines.insert(k + 1, "\tadd.s32 \t%r1, %r1, %zz9;")
    with pytest.raises(PtxSyntaxError) as info:
        parse("\n".join(lines), "calls.ptx")
    assert info.value.line == k + 2
    assert info.value.column == lines[k + 1].index("%zz9") + 1


def test_negated_register_with_selector_is_a_use():
    """vmad's '-%r1.b0' negates a selected byte of a register: the register is read (a lost
    use would let the allocator put another value there)."""
    from ptxalloc.ir.operands import Neg
    mod = parse("""
.version 8.0
.target sm_80
.address_size 64
.visible .entry k()
{
  .reg .b32 %r<5>;
  mov.u32 %r1, 1;
  mov.u32 %r2, 2;
  mov.u32 %r3, 3;
  vmad.u32.u32.u32.sat.shr7 %r4, -%r1.b0, -%r2.h1, -%r3;
  ret;
}
""", "vmad.ptx")
    fn = mod.functions[0]
    vmad = next(i for i in fn.body if type(i) is Instruction and i.opcode.startswith("vmad"))
    r = fn.regs.lookup
    assert vmad.ops[1] == Neg(Reg(r("%r1"), ".b0"))
    assert vmad.ops[2] == Neg(Reg(r("%r2"), ".h1"))
    assert vmad.ops[3] == Neg(Reg(r("%r3")))
    assert sorted(fn.regs.names[v] for v in vmad.uses) == ["%r1", "%r2", "%r3"]
    assert vmad.render(fn.regs.names.__getitem__).split(None, 1)[1] == \
        "%r4, -%r1.b0, -%r2.h1, -%r3;"


def test_one_address_object_per_text_resolved_in_its_scope():
    """A plain address is parsed once per text and shared (issue 16), but an inner scope
    that declares its register again gets its own: the address names the inner register
    there and the outer one again after the scope."""
    text = (".version 7.0\n.target sm_80\n.address_size 64\n"
            ".entry k(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\t.reg .b32 %r<4>;\n"
            "\tld.param.u64 %rd1, [p];\n"
            "\tld.global.u32 %r1, [%rd1+4];\n"
            "\tld.global.u32 %r2, [%rd1+4];\n"
            "\t{\n\t.reg .b64 %rd1;\n\tmov.u64 %rd1, 0;\n"
            "\tld.global.u32 %r3, [%rd1+4];\n\t}\n"
            "\tld.global.u32 %r3, [%rd1+4];\n\tret;\n}\n")
    fn = parse(text).functions[0]
    loads = [ins for ins in fn.instructions() if ins.opcode == "ld.global.u32"]
    outer, again, inner, after = (ins.ops[1] for ins in loads)
    assert type(outer) is Mem and outer is again
    assert inner is not outer and inner.base.v != outer.base.v
    assert after is not inner and after.base.v == outer.base.v
    assert fn.regs.names[inner.base.v] == fn.regs.names[outer.base.v] == "%rd1"
    assert [ins.uses for ins in loads] == [(outer.base.v,), (outer.base.v,), (inner.base.v,),
                                           (outer.base.v,)]


def test_label_then_block_comment_reads_as_the_general_path_does():
    """Ocelot writes ``$BB_1_2: /* $Lt_1_3 */`` on one line: the fast path for it gives the
    same statements as the token-by-token path (here reached by a second comment on the
    line), and a duplicate label is warned about at the label's own column."""
    def body(label_line: str):
        text = (".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"
                "\t.reg .b32 %r<2>;\n\tmov.u32 %r0, 1;\n" + label_line +
                "\tadd.u32 %r1, %r0, 1;\n$L:\n\tret;\n}\n")
        module = parse(text, "k.ptx")
        out = []
        for s in module.functions[0].body:
            if type(s) is Label:
                out.append(("label", s.name, s.line))
            elif type(s) is Raw:
                out.append((s.kind, s.text, s.line))
            else:
                out.append(("instr", s.opcode, s.line))
        return out, [(w.line, w.column, w.message) for w in module.warnings]

    fast, fast_warnings = body("$L:\t\t\t/* $Lt_1_3 * / */\n")
    general, general_warnings = body("$L:\t\t\t/* $Lt_1_3 * / */ /**/\n")
    assert fast == [x for x in general if x != (COMMENT, "/**/", 8)]
    assert ("label", "$L", 8) in fast and (COMMENT, "/* $Lt_1_3 * / */", 8) in fast
    assert fast_warnings == general_warnings
    assert fast_warnings[0][:2] == (10, 1) and "defined twice" in fast_warnings[0][2]
