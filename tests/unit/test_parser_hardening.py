"""Parser hardening (issue 11): statements are found by tokens, not lines (directives on one
line, a whole module on one line), in time linear in the input (an unclosed function, 20,000
statements on one line), labels never swallow a '::' qualifier, a missing comma is reported at
the token after it, and light validation turns what ptxas rejects into named warnings
(errors under ``--strict``)."""

from __future__ import annotations

import re

import pytest

from conftest import DATA, REPO
from ptxalloc.cli import main
from ptxalloc.errors import PtxSyntaxError
from ptxalloc.ir import isa
from ptxalloc.ir.instruction import DIRECTIVE, LOC
from ptxalloc.ir.module import Raw
from ptxalloc.ptx import emit_module, parse

from test_parser import HDR, _marked, kernel

_WS = re.compile(r"\s+")


def _minified(text: str) -> str:
    """``text`` without comments, on one line (``.loc``/``.file`` kept: they end by grammar)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    return " ".join(text.split())


def _shape(module):
    return [(f.name, [i.render(f.regs.names.__getitem__) for i in f.instructions()],
             [lab.name for lab in f.labels()], len(f.regs)) for f in module.functions]


# --- statements by tokens ---------------------------------------------------------------------


def test_header_directives_on_one_line():
    m = parse(".version 8.0 .target sm_80 .address_size 64\n"
              ".visible .entry k()\n{\n\tret;\n}\n", "one.ptx")
    assert (m.version, m.target, m.address_size) == ("8.0", ["sm_80"], 64)
    assert m.sm == "sm_80"
    assert [f.name for f in m.functions] == ["k"]
    assert m.warnings == []


def test_target_list_recorded_faithfully():
    m = parse(".version 7.0 .target sm_75, texmode_independent .address_size 32 "
              ".visible .entry k() { ret; }", "t.ptx")
    assert (m.version, m.target, m.address_size) == ("7.0", ["sm_75", "texmode_independent"],
                                                      32)


def test_comments_inside_module_directives_are_not_operands():
    """ptxas accepts ``.target /* c */ sm_80``; the comment is no target (the fuzzer found the
    old parser reading '/*' as the architecture)."""
    m = parse(".version 7.0 /* v */\n.target /* comment */ sm_80 // trailing\n"
              ".address_size /* a */ 64\n.visible .entry k() { ret; }", "c.ptx")
    assert (m.version, m.target, m.address_size) == ("7.0", ["sm_80"], 64)
    assert m.sm == "sm_80" and m.warnings == []


@pytest.mark.parametrize("name", ["loops_sm80.ptx", "calls_sm90.ptx", "vectors_sm90.ptx",
                                  "misc_sm90.ptx"])
def test_whole_module_on_one_line_parses_as_the_original(name):
    original = (DATA / name).read_text()
    one_line = _minified(original)
    assert "\n" not in one_line
    a, b = parse(original, name), parse(one_line, name)
    assert b.version == a.version and b.target == a.target
    assert _shape(b) == _shape(a)
    # re-emitted with one statement per line, it is the input up to whitespace
    assert _WS.sub("", emit_module(b)) == _WS.sub("", one_line)
    assert _shape(parse(emit_module(b), name)) == _shape(a)


def test_loc_and_statement_on_one_line_keep_their_own_kinds():
    m = parse(kernel(".reg .b32 %r<3>;\n\t.loc 1 7 2 mov.u32 %r1, 1; .loc 1 8 4\n"
                     "\tadd.s32 %r2, %r1, %r1; .file 2 \"x.cu\" mov.u32 %r2, 3;\n"), "l.ptx")
    f = m.functions[0]
    locs = [s.text for s in f.body if type(s) is Raw and s.kind == LOC]
    assert locs == [".loc 1 7 2", ".loc 1 8 4", '.file 2 "x.cu"']
    ins = f.instructions()
    assert [i.opcode for i in ins] == ["mov.u32", "add.s32", "mov.u32", "ret"]
    assert [i.loc for i in ins[:3]] == [(1, 7, 2, None), (1, 8, 4, None), (1, 8, 4, None)]
    assert [i.line for i in ins[:3]] == [8, 9, 9]


def test_loc_with_inlined_at_ends_by_grammar():
    m = parse(kernel(".reg .b32 %r<3>;\n\t.loc 1 5 3, function_name $L__info_string0, "
                     "inlined_at 1 9 7 mov.u32 %r1, 1;\n"), "l.ptx")
    f = m.functions[0]
    assert [s.text for s in f.body if type(s) is Raw and s.kind == LOC] == [
        ".loc 1 5 3, function_name $L__info_string0, inlined_at 1 9 7"]
    assert f.instructions()[0].loc == (1, 5, 3, (1, 9, 7))


def test_file_string_with_a_newline_is_accepted():
    # ptxas accepts it (checked with CUDA 13.0's ptxas): the string ends the directive
    text = HDR + '.file 1 "dir\nname.cu"\n.visible .entry k()\n{\n\tret;\n}\n'
    m = parse(text, "f.ptx")
    assert [f.name for f in m.functions] == ["k"]
    assert any(type(it) is Raw and it.text == '.file 1 "dir\nname.cu"' for it in m.items)
    assert _WS.sub("", emit_module(m)) == _WS.sub("", text)


def test_module_without_function_warns():
    m = parse(".version 8.0\n.target sm_80\n.address_size 64\n", "empty.ptx")
    assert [str(w) for w in m.warnings] == ["empty.ptx: warning: no function in the module"]


def test_cli_prints_the_no_function_warning(tmp_path, capsys):
    p = tmp_path / "empty.ptx"
    p.write_text(".version 8.0 .target sm_80 .address_size 64\n")
    assert main(["parse", str(p)]) == 0
    out, err = capsys.readouterr()
    assert err == f"{p}: warning: no function in the module\n"
    assert "PTX 8.0 sm_80, 0 function(s)" in out


@pytest.mark.parametrize("header,missing", [
    (".target sm_80\n.address_size 64\n", ".version"),
    (".version 8.0\n.address_size 64\n", ".target"),
])
def test_module_without_version_or_target_warns(header, missing, tmp_path, capsys):
    """ptxas rejects a module without .version or .target; the fuzzer found both allocated
    silently. A warning names the missing directive; --strict makes it an error without a
    meaningless line 0."""
    text = header + ".visible .entry k() { ret; }\n"
    m = parse(text, "m.ptx")
    assert [str(w) for w in m.warnings] == [
        f"m.ptx: warning: no {missing} directive (ptxas requires one)"]
    p = tmp_path / "m.ptx"
    p.write_text(text)
    assert main(["allocate", "--strict", str(p)]) == 2
    err = capsys.readouterr().err
    assert err == f"ptxalloc: {p}: syntax error: no {missing} directive (ptxas requires one)\n"


def test_label_then_loc_then_instruction_on_one_line():
    """Found by the fuzzer (join_lines of gpuocelot's scoped-variables.ptx): a label, a .loc and
    an instruction on one line took the one-statement fast path, which read '.loc 28 11 0 exit'
    as one statement ("cannot parse statement"). ptxas accepts the line."""
    text = (".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"
            ".reg .b32 %r<3>;\nmov.u32 %r1, 1;\n$L1: .loc 1 2 0 add.u32 %r2, %r1, 1;\n"
            ".loc 1 3 0 exit;\n}\n")
    (fn,) = parse(text, "k.ptx").functions
    assert [i.opcode for i in fn.instructions()] == ["mov.u32", "add.u32", "exit"]
    add = fn.instructions()[1]
    assert add.line == 8 and add.loc[:2] == (1, 2)


# --- linear time ------------------------------------------------------------------------------


def _body(n: int) -> list[str]:
    stmts = []
    for k in range(n):
        stmts.append(f"add.s32 %r{k % 7 + 1}, %r{(k + 1) % 7 + 1}, {k};")
        if k % 50 == 49:
            stmts.append(f"// comment {k}")       # comments without ';' made the old regex fail
    return stmts


def test_unclosed_function_in_a_2000_line_body_is_reported():
    lines = _body(2000)
    text = (HDR + ".visible .entry k()\n{\n\t.reg .b32 %r<8>;\n\t" + "\n\t".join(lines)
            + "\n\t// the '}' is missing\n")
    with pytest.raises(PtxSyntaxError) as info:
        parse(text, "open.ptx")
    e = info.value
    # reported at the end of the input, naming where the function was opened
    assert e.message == "function 'k' opened at 6:1 is not closed"
    assert (e.line, e.column) == (text.count("\n"), 1 + len("\t// the '}' is missing"))


def test_unclosed_function_followed_by_another_function():
    text = (HDR + ".visible .entry a()\n{\n\tret;\n" + ".visible .entry b()\n{\n\tret;\n}\n")
    with pytest.raises(PtxSyntaxError) as info:
        parse(text, "two.ptx")
    assert info.value.message == "function 'a' opened at 6:1 is not closed"
    assert info.value.line == 8


def test_unclosed_function_before_other_functions_of_nvcc_output():
    # calls_sm80.ptx without the '}' closing its first function (line 49): the old body regex
    # backtracked for minutes on this shape
    text = (DATA / "calls_sm80.ptx").read_text()
    lines = text.split("\n")
    assert lines[48] == "}" and lines[38] == "{"
    del lines[48]
    with pytest.raises(PtxSyntaxError) as info:
        parse("\n".join(lines), "calls.ptx")
    assert info.value.message == "function '_Z6op_addff' opened at 39:1 is not closed"
    assert info.value.line == 50          # where the next function starts


def test_20000_statements_on_one_line():
    n = 20000
    body = " ".join(s for s in _body(n) if not s.startswith("//"))
    text = (".version 8.0 .target sm_80 .address_size 64 .visible .entry k() { "
            ".reg .b32 %r<8>; " + body + " ret; }")
    m = parse(text, "long.ptx")
    f = m.functions[0]
    ins = f.instructions()
    assert len(ins) == n + 1
    assert {i.line for i in ins} == {1}
    assert ins[12345].ops[2].text == "12345"
    assert [(i.opcode, i.defs) for i in ins[:2]] == [("add.s32", (0,)), ("add.s32", (1,))]


# --- labels -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stmt", [
    "mbarrier.arrive.shared::cta.b64 %rd15, [%r42], %r43;",
    "mbarrier.arrive.shared::cta.b64 %rd15,[%r42],%r43;",
    "mbarrier.arrive.shared::cta.b64\t%rd15 , [ %r42 ] , %r43 ;",
    "mbarrier.arrive.shared::cta.b64 %rd15, [%r42], %r43; // arrive",
    "mov.u32 %r42, 0; mbarrier.arrive.shared::cta.b64 %rd15, [%r42], %r43;",
])
def test_mbarrier_arrive_with_shared_cta_is_not_a_label(stmt):
    m = parse(kernel(".reg .b32 %r<44>;\n\t.reg .b64 %rd<16>;\n\t" + stmt + "\n",
                     header=".visible .entry k()").replace(".target sm_80", ".target sm_90"),
              "mb.ptx")
    f = m.functions[0]
    assert f.labels() == []
    arrive = f.instructions()[-2]
    assert arrive.opcode == "mbarrier.arrive.shared::cta.b64"
    names = f.regs.names
    assert [names[v] for v in arrive.defs] == ["%rd15"]
    assert sorted(names[v] for v in arrive.uses) == ["%r42", "%r43"]


def test_createpolicy_with_l2_qualifier_is_not_a_label():
    m = parse(kernel(".reg .b64 %rd<3>;\n\t"
                     "createpolicy.fractional.L2::evict_last.b64 %rd1, 0f3F800000;\n"
                     "\tcreatepolicy.fractional.L2::evict_last.L2::evict_unchanged.b64 %rd2, "
                     "0f3F000000; createpolicy.fractional.L2::evict_first.b64 %rd1, 1.0;\n"),
              "cp.ptx")
    f = m.functions[0]
    assert f.labels() == []
    assert [i.opcode for i in f.instructions()][:3] == [
        "createpolicy.fractional.L2::evict_last.b64",
        "createpolicy.fractional.L2::evict_last.L2::evict_unchanged.b64",
        "createpolicy.fractional.L2::evict_first.b64"]


def test_label_and_instruction_on_one_line_and_labels_on_one_line():
    m = parse(kernel(".reg .b32 %r<3>;\nA: B : mov.u32 %r1, 1; C:add.s32 %r2, %r1, %r1;\n"
                     "\tbra.uni A;\n"), "lab.ptx")
    f = m.functions[0]
    assert [lab.name for lab in f.labels()] == ["A", "B", "C"]
    assert [i.opcode for i in f.instructions()] == ["mov.u32", "add.s32", "bra.uni", "ret"]


# --- error positions --------------------------------------------------------------------------


@pytest.mark.parametrize("marked", [
    kernel(".reg .f32 %f<8>;\n\tadd.f32 %f1, %f4 \u00a4%f7;\n"),
    kernel(".reg .f32 %f<8>;\n\tadd.f32 %f7, %f4 \u00a4%f7;\n"),
    kernel(".reg .f32 %f<8>;\n\tadd.f32 %f1 \u00a4%f4, %f7;\n"),
    kernel(".reg .b32 %r<8>;\n\t.reg .b64 %rd<3>;\n\tld.global.u32 %r1, [%rd1 \u00a4%rd2];\n"),
])
def test_missing_comma_is_reported_at_the_token_after_it(marked):
    text, line, column, _ = _marked(marked)
    with pytest.raises(PtxSyntaxError) as info:
        parse(text, "c.ptx")
    e = info.value
    assert (e.line, e.column) == (line, column), str(e)
    assert e.message.startswith("expected ',' before '%")


def test_statement_without_semicolon_before_close():
    text, line, column, _ = _marked(HDR + ".visible .entry k()\n{\n\tret \u00a4}\n")
    with pytest.raises(PtxSyntaxError) as info:
        parse(text, "s.ptx")
    assert (info.value.line, info.value.column) == (line, column)
    assert "expected ';'" in info.value.message


# --- light validation -------------------------------------------------------------------------

WARNING_CASES = {
    "duplicate label": (kernel(".reg .b32 %r<3>;\nL1:\n\tmov.u32 %r1, 1;\n\u00a4L1:\n"),
                        "label 'L1' is defined twice in function 'k' (first at line 8)"),
    "duplicate register": (kernel(".reg .b32 %r<4>;\n\t.reg .b32 \u00a4%r2;\n"),
                           "register '%r2' is declared twice in one scope (first at line 7)"),
    "unknown opcode": (kernel(".reg .b32 %r<3>;\n\t\u00a4frob.s32 %r1, %r2, %r2;\n"),
                       "unknown opcode 'frob.s32'"),
    "operand count": (kernel(".reg .b32 %r<3>;\n\t\u00a4add.s32 %r1, %r2;\n"),
                      "'add.s32' takes 3 operands, not 2"),
    "unknown version": (HDR.replace(".version 7.0", ".version \u00a410.0")
                        + ".visible .entry k()\n{\n\tret;\n}\n", "unknown .version '10.0'"),
    "unknown directive": (kernel(".reg .b32 %r<3>;\n\t\u00a4.regx .u32 %r9;\n"),
                          "unknown directive '.regx' in a function body"),
    # ptxas: "Illegal to write to function input parameter 'a'" (kernels and .func alike)
    "store to an input parameter": (
        HDR + ".visible .func (.param .b32 r) f(.param .b32 a)\n{\n\t.reg .b32 %r<2>;\n"
        "\tld.param.b32 %r1, [a];\n\tst.param.b32 [\u00a4a], %r1;\n"
        "\tst.param.b32 [r], %r1;\n\tret;\n}\n",
        "Illegal to write to function input parameter 'a' (ptxas rejects it)"),
}


def test_a_call_argument_named_like_an_input_parameter_is_a_store_to_it_too():
    # ptxas resolves [a] to the kernel's input parameter even inside the call's scope that
    # declares a .param a of its own, and rejects the store
    text = (HDR + ".func g(.param .b32 a)\n{\n\tret;\n}\n"
            ".visible .entry k(.param .b32 a)\n{\n\t.reg .b32 %r<2>;\n"
            "\tld.param.b32 %r1, [a];\n\t{\n\t.param .b32 a;\n\tst.param.b32 [a], %r1;\n"
            "\tcall.uni g, (a);\n\t}\n\tret;\n}\n")
    assert [w.message for w in parse(text, "c.ptx").warnings] == [
        "Illegal to write to function input parameter 'a' (ptxas rejects it)"]


@pytest.mark.parametrize("case", list(WARNING_CASES))
def test_light_validation_warns_with_position(case):
    marked, message = WARNING_CASES[case]
    text, line, column, source_line = _marked(marked)
    m = parse(text, "w.ptx")
    assert [(w.message, w.line, w.column) for w in m.warnings] == [(message, line, column)]
    assert str(m.warnings[0]) == f"w.ptx:{line}:{column}: warning: {message}"
    assert m.warnings[0].source_line == source_line


def test_shadowing_in_a_nested_scope_is_not_a_duplicate():
    m = parse(kernel(".reg .b32 %r<3>;\n\t{\n\t.reg .b32 %r1;\n\tmov.u32 %r1, 2;\n\t}\n"), "s.ptx")
    assert m.warnings == []


@pytest.mark.parametrize("command", ["parse", "analyze", "allocate"])
def test_cli_prints_warnings_and_strict_makes_them_errors(tmp_path, capsys, command):
    text, line, column, _ = _marked(WARNING_CASES["duplicate label"][0])
    p = tmp_path / "w.ptx"
    p.write_text(text)
    assert main([command, str(p)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines()[0] == (f"{p}:{line}:{column}: warning: label 'L1' is defined twice "
                                   f"in function 'k' (first at line 8)")
    assert main([command, str(p), "--strict"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"ptxalloc: {p}:{line}:{column}: syntax error: label 'L1' is defined twice "
                   f"in function 'k' (first at line 8)\n")


def test_library_api_does_not_print(capsys):
    parse(_marked(WARNING_CASES["unknown opcode"][0])[0], "w.ptx")
    assert capsys.readouterr() == ("", "")


def test_exact_operand_counts_agree_with_the_isa_syntax():
    """Every syntax form in shared/ptx_syntax of an instruction the table gives an exact count
    for has that many operands."""
    root = REPO.parent / "shared" / "ptx_syntax"
    if not root.is_dir():
        pytest.skip("../shared/ptx_syntax is absent")
    for base, count in isa.EXACT_OPERAND_COUNTS.items():
        forms = [ln for ln in (root / f"{base}.txt").read_text().splitlines()
                 if re.match(rf"{base}[.{{ \t]", ln) and ";" in ln]
        assert forms, base
        for form in forms:
            operands = form.split(";")[0].split(None, 1)[1]
            assert len(operands.split(",")) == count, (base, form)


# --- input that is ptxalloc's own output ------------------------------------------------------


def test_physical_names_and_annotation_comments_parse_as_ordinary_input():
    text = kernel(".reg .b32 %R<13>;\n\t.reg .b64 %RD<5>;\n\t//@ %f1#4 -> %R12\n"
                  "\tld.param.u64 %RD4, [k_p];\n\tmov.u32 %R12, 1; //@ spill\n"
                  "\tst.global.u32 [%RD4], %R12;\n")
    m = parse(text, "own.ptx")
    f = m.functions[0]
    assert m.warnings == []
    st = f.instructions()[2]
    assert sorted(f.regs.names[v] for v in st.uses) == ["%R12", "%RD4"]
    assert f.instructions()[1].comment == "//@ spill"


def test_empty_statement_after_another_on_one_line():
    text, line, column, _ = _marked(kernel(".reg .b64 %rd1;\n\tmov.u64 %rd1, 0; \u00a4;\n"))
    with pytest.raises(PtxSyntaxError) as info:
        parse(text, "e.ptx")
    assert info.value.message == "empty statement"
    assert (info.value.line, info.value.column) == (line, column)


def test_a_directive_that_only_starts_like_reg_declares_nothing():
    """``.regx .u32 %r0;`` is not a declaration on the one-statement-per-line fast path either:
    it is kept as the directive it is, as it is when it lists two names."""
    for decl in (".regx .u32 %r0;", ".regx .u32 %r0, %r1;"):
        text = (".version 7.0\n.target sm_80\n.address_size 64\n.entry k()\n{\n\t" + decl
                + "\n\tret;\n}\n")
        fn = parse(text).functions[0]
        assert len(fn.regs) == 0
        assert [(type(s), s.kind, s.text) for s in fn.body[:1]] == [(Raw, DIRECTIVE, decl)]
