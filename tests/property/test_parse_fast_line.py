"""The parser's one-match line (``ptx/parser.py``, ``_SIMPLE_LINE``: an instruction, a one-
register declaration, a label or a ``.loc`` alone on its line) against its general path
(statements read token by token): a body written one statement a line and the same body on one
line must parse alike -- the same registers and labels, every instruction the same opcode,
guard, operands, roles, defs, uses, copy flag and location, the same warnings. Generated lines
vary blanks, guards, ``::`` opcodes, addresses, immediates and operand counts, including forms
the one match refuses (a '\\r' before the ';'); and the bracket-aware operand splits against
their definition."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from ptxalloc.errors import PtxSyntaxError
from ptxalloc.ir.instruction import Instruction, Label
from ptxalloc.ptx import parse
from ptxalloc.ptx.parser import _SIMPLE_LINE

REGS = ["%r1", "%r2", "%r3", "%rd1", "%f1"]
DECLS = [("u32", "%r1"), ("b32", "%r2"), ("s32", "%r3"), ("u64", "%rd1"), ("f32", "%f1"),
         ("pred", "%p1")]
blank = st.sampled_from([" ", "\t", "  ", " \t"])
pad = st.sampled_from(["", " ", "\t"])
operand = st.one_of(st.sampled_from(REGS), st.sampled_from(["0", "-1", "0x10", "4U", "0f3F800000"]),
                    st.builds(lambda r, o: f"[{r}{o}]", st.sampled_from(["%rd1", "%r1"]),
                              st.sampled_from(["", "+4", "+-8", " + 12"])))
opcode = st.sampled_from(["add.u32", "mov.b32", "mov.u32", "ld.global.u32", "st.shared::cta.u32",
                          "selp.b32", "mad.lo.s32", "cvt.u64.u32", "ret", "exit", "bar.sync",
                          "frobnicate.x"])


@st.composite
def instruction(draw) -> str:
    guard = draw(st.sampled_from(["", "@%p1", "@!%p1"]))
    ops = draw(st.lists(operand, max_size=4))
    text = draw(opcode)
    if ops:
        sep = draw(st.sampled_from([",", ", ", " ,", "\t,\t"]))
        text += draw(blank) + sep.join(ops)
    if guard:
        text = guard + draw(blank) + text
    return draw(pad) + text + draw(pad) + ";" + draw(st.sampled_from(["", " ", "\r"]))


@st.composite
def declarations(draw) -> list[str]:
    return [draw(pad) + ".reg" + draw(blank) + "." + ptype + draw(blank) + name + draw(pad) + ";"
            for ptype, name in DECLS]


@st.composite
def other_line(draw) -> str:
    """A label alone, a ``.loc`` or a blank line (read with one match too)."""
    kind = draw(st.sampled_from(["label", "loc", "blank"]))
    if kind == "label":
        return draw(pad) + draw(st.sampled_from(["$L__BB0_1", "L2", "_x%3"])) + draw(pad) + ":"
    if kind == "loc":
        line, col = draw(st.integers(1, 99)), draw(st.integers(0, 9))
        return draw(pad) + ".loc" + draw(blank) + f"1 {line} {col}" + draw(pad)
    return draw(pad)


def _body(lines: list[str], joined: bool) -> str:
    inner = " ".join(x.strip() for x in lines) if joined else "\n".join(lines)
    return (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"
            + inner + "\n}\n")


def _facts(text: str):
    try:
        module = parse(text, "f.ptx")
    except PtxSyntaxError as e:
        return ("error", e.message)
    fn = module.functions[0]
    instrs = [(s.opcode, s.guard, s.guard_neg, [o.render(str) for o in s.ops], s.roles,
               s.defs, s.uses, s.is_copy, s.known, s.loc)
              for s in fn.body if type(s) is Instruction]
    labels = [s.name for s in fn.body if type(s) is Label]
    return (fn.regs.names, [c.name for c in fn.regs.classes], instrs, labels,
            sorted(re.sub(r"line \d+", "line N", w.message) for w in module.warnings))


@settings(max_examples=150, deadline=None)
@given(declarations(), st.lists(st.one_of(instruction(), other_line()), min_size=1, max_size=8))
def test_one_match_line_parses_as_the_general_path(decls, statements):
    lines = decls + statements
    assert _facts(_body(lines, joined=False)) == _facts(_body(lines, joined=True))


def test_the_one_match_takes_the_common_lines_and_refuses_the_others():
    takes = ["\tadd.u32 %r1, %r2, 3;\n", "@!%p1 bra $L1;\n", "ret;\n", ".reg .u32 %r1;\n",
             "$L__BB0_2:\n", "\t.loc\t1 22 5\n", " \t\n",
             "ld.shared::cta.u32 %r1, [%r2+4] ;\r\n"]
    refuses = ["L1: add.u32 %r1, %r2;\n", "add.u32 %r1, %r2; // c\n", "mov.b64 %rd1, {%r1,%r2};\n",
               "call (%r1), f, (%r2);\n", "ret \r;\n", ".reg .u32 %r<4>;\n", "add.u32 %r1, %r2;",
               ".loc 1 2 3 // x.py:2\n", "$L1: /* c */\n"]
    assert all(_SIMPLE_LINE.match(x) for x in takes)
    assert not any(_SIMPLE_LINE.match(x) for x in refuses)


def _by_character(text: str):
    """The bracket-aware splits by their definition, one character at a time: (the pieces
    between commas outside brackets, the split at the first '|' outside them, the first
    unopened closer or else the last unclosed opener)."""
    pieces, pipe, opened, bad = [], None, [], None
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch in "{[(":
            depth += 1
            opened.append(i)
        elif ch in "}])":
            depth -= 1
            if not opened and bad is None:
                bad = i
            elif opened:
                opened.pop()
        elif ch == "," and depth == 0:
            pieces.append(text[start:i])
            start = i + 1
        elif ch == "|" and depth == 0 and pipe is None:
            pipe = (text[:i], text[i + 1:])
    pieces.append(text[start:])
    if not any(c in text for c in "{[("):      # no opener: every comma splits
        pieces = text.split(",")
    if bad is None:
        bad = opened[-1] if opened else -1
    return pieces, pipe or (text, None), bad


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=",{}[]()|a %", max_size=24))
def test_bracket_aware_splits_follow_their_definition(text):
    from ptxalloc.ptx.parser import _split_pipe, _split_top, _unbalanced_at
    pieces, pipe, bad = _by_character(text)
    assert _split_top(text) == pieces
    assert _split_pipe(text) == pipe
    assert _unbalanced_at(text) == bad
