"""The parser's short paths for the commonest operands and ``.loc`` lines (issue 16): a name
alone (a label, a symbol), an address of a register and a decimal offset, and a ``.loc`` text
read once per file give what the general path gives -- the same operands, roles, warnings and
errors, on the project's PTX and on hand-written edge cases."""

from __future__ import annotations

import re

import pytest

from conftest import DATA
from ptxalloc.errors import PtxSyntaxError
from ptxalloc.ir.module import Instruction, Label
from ptxalloc.ir.operands import Mem, Reg, Sym
from ptxalloc.ptx import parse, parser

NEVER = re.compile(r"(?!)")

EDGES = """.version 7.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{
\t.reg .b64 %rd<3>;
\t.reg .b32 %r<8>;
\t.reg .pred %p1;
\t.loc 1 10 3
\tld.param.u64 %rd1, [p];
\tld.param.u64 %rd2, [p+8];
\tld.global.u32 %r1, [%rd1];
\tld.global.u32 %r2, [ %rd1 + 16 ];
\t.loc 1 11 3
\tld.global.u32 %r3, [%rd1 + -4];
\tld.global.u32 %r4, [%rd1-8];
\tld.global.u32 %r5, [%rd1+0x10];
\tld.global.v2.u32 {%r6, _}, [%rd2+8];
\tmov.u32 %r7, %tid.x;
\t.loc 1 10 3
\tsetp.eq.u32 %p1, %r7, 0;
\t.loc 1 x 3
\t@%p1 bra $L__BB0_2;
\tst.global.u32 [%rd1+4], %r7;
$L__BB0_2:
\tret;
}
"""


def statements(text: str, name: str = "t.ptx"):
    """What the parser builds from ``text``, comparable between two parses."""
    try:
        module = parse(text, name)
    except PtxSyntaxError as e:
        return ("error", str(e))
    out = [[str(w) for w in module.warnings]]
    for fn in module.functions:
        for s in fn.body:
            if type(s) is Instruction:
                out.append((s.opcode, repr(s.ops), s.roles, s.defs, s.uses, s.guard, s.line,
                            s.loc, s.is_copy))
            elif type(s) is Label:
                out.append(("label", s.name, s.line))
            else:
                out.append((s.kind, s.text, s.line))
    return out


def general_path(monkeypatch) -> None:
    """Send every operand through the general path (the short paths' patterns never
    match)."""
    monkeypatch.setattr(parser, "_NAME", NEVER)
    monkeypatch.setattr(parser, "_REG_ADDRESS", NEVER)


INPUTS = [("edges", EDGES),
          ("unresolved name", EDGES.replace("bra $L__BB0_2", "bra %nope")),
          ("unknown label", EDGES.replace("bra $L__BB0_2", "bra $L__BB0_9")),
          ("undeclared base", EDGES.replace("[%rd1-8]", "[%rd9-8]")),
          ("register in an offset", EDGES.replace("[%rd1-8]", "[%rd1-%r1]"))]
INPUTS += [(p.name, p.read_text()) for p in sorted(DATA.glob("*.ptx"))]
INPUTS += [(p.name, p.read_text()) for p in sorted((DATA / "hand").glob("*.ptx"))]


@pytest.mark.parametrize("name,text", INPUTS, ids=[n for n, _ in INPUTS])
def test_short_paths_build_what_the_general_path_builds(name, text, monkeypatch):
    short = statements(text)
    general_path(monkeypatch)
    assert statements(text) == short


def test_short_path_operands():
    fn = parse(EDGES, "t.ptx").functions[0]
    reg = fn.regs.lookup
    loads = {ins.ops[0].v: ins.ops[1] for ins in fn.instructions()
             if ins.opcode == "ld.global.u32"}
    assert {fn.regs.names[v]: (type(m.base), m.offset) for v, m in loads.items()} == {
        "%r1": (Reg, ""), "%r2": (Reg, "+16"), "%r3": (Reg, "+-4"), "%r4": (Reg, "-8"),
        "%r5": (Reg, "+0x10")}
    assert all(type(m) is Mem and m.base.v == reg("%rd1") and not m.rest and not m.suffix
               for m in loads.values())
    branch = next(ins for ins in fn.instructions() if ins.base == "bra")
    assert branch.ops == [Sym("$L__BB0_2")] and branch.uses == (reg("%p1"),)


def test_errors_name_the_same_place_on_both_paths(monkeypatch):
    bad = [EDGES.replace("bra $L__BB0_2", "bra %nope"),
           EDGES.replace("[%rd1-8]", "[%rd1-%r1]")]
    short = [statements(t) for t in bad]
    assert [s[0] for s in short] == ["error", "error"]
    assert "'%nope' is not a declared register" in short[0][1] and ":23:" in short[0][1]
    assert "reads register '%r1'" in short[1][1]
    general_path(monkeypatch)
    assert [statements(t) for t in bad] == short


def test_a_loc_text_read_once_per_file_gives_each_instruction_its_location():
    """The location of a ``.loc`` seen before is the one read then; a ``.loc`` naming no line
    (``1 x 3``) leaves the location as it was, however often it repeats."""
    fn = parse(EDGES, "t.ptx").functions[0]
    loc = {ins.opcode.split(".")[0] + str(ins.line): ins.loc for ins in fn.instructions()}
    assert loc["ld10"] == loc["setp21"] == (1, 10, 3, None)
    assert loc["ld15"] == (1, 11, 3, None)
    assert loc["bra23"] == loc["setp21"]
    twice = parse(EDGES.replace("}\n", "}\n", 1) + EDGES[EDGES.index(".visible"):]
                  .replace(".entry k", ".entry k2"), "t.ptx")
    first, second = ([ins.loc for ins in f.instructions()] for f in twice.functions)
    assert first == second
