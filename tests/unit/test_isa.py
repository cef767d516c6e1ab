"""The ISA table (``ptxalloc.ir.isa``) against the PTX ISA 9.0 syntax of every instruction.

``shared/ptx_syntax`` holds one file per PTX 9.0 instruction with its syntax forms as the PTX ISA
manual writes them (``d`` the destination, ``[a]`` an address, ``{...}`` optional parts,
``.mod = { ... }`` the values of each modifier). For every form this test builds concrete
instructions — modifiers set to the first (and, in a second variant, the last) value of their
set, optional parts dropped and included, every operand name replaced by a declared register of
its own (an address ``[%rdN]`` for ``[a]``, a label for ``bra``, an immediate where the manual
requires one, a vector for vector and fragment operands) — parses each one inside a tiny
``.entry`` with the project parser, and checks:

* the opcode is known;
* the registers put in place of the destination operands are exactly ``instr.defs``;
* every other register is in ``instr.uses``, and a destination is in ``instr.uses`` only where
  the manual says the instruction also reads it (``wgmma.mma_async``'s ``d`` unless scale-d is
  the literal 0);
* the register tuples (``isa.tuple_operands``) are exactly the vector operands the SPEC says are
  tuples.

Which operand names are destinations is the table :data:`DESTINATIONS` below, written per
instruction from the PTX ISA manual, independently of the implementation. Forms whose text the
parser cannot read yet, or where ``Instruction.set_roles`` is knowingly conservative, are listed
in :data:`KNOWN_GAPS` and reported as xfail when (and only when) they fail.

The folder lives outside the repository (``../shared/ptx_syntax``); set ``PTXALLOC_PTX_SYNTAX``
to point elsewhere. Without it the syntax tests skip. ``python tests/unit/test_isa.py`` prints
the coverage (forms and instructions built).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from ptxalloc.errors import PtxSyntaxError
from ptxalloc.ir import isa
from ptxalloc.ir.instruction import Instruction
from ptxalloc.ir.operands import Mem, Pair, Reg, Vec
from ptxalloc.ir.registers import RegClass, RegTable
from ptxalloc.ptx import parse, parse_file

_SHARED = Path(__file__).resolve().parents[3] / "shared"
SYNTAX_DIR = Path(os.environ.get("PTXALLOC_PTX_SYNTAX", _SHARED / "ptx_syntax"))
CORPUS_DIR = Path(os.environ.get("PTXALLOC_CORPUS", _SHARED / "corpus"))

# --------------------------------------------------------------------------------------------
# The reviewed table: destination operands per instruction (syntax file stem), from the PTX ISA
# 9.0 manual, chapter 9.7. A name not listed is a source. "d" of wgmma.mma_async is also read
# (see _reads_destination).
# --------------------------------------------------------------------------------------------

_D = frozenset({"d"})
DESTINATIONS: dict[str, frozenset[str]] = {
    # 9.7.1 integer arithmetic; 9.7.2 extended precision (the carry flag is not a register)
    **{k: _D for k in ("abs", "add", "add.cc", "addc", "sub", "sub.cc", "subc", "mul", "mad",
                       "mad.cc", "madc", "mul24", "mad24", "sad", "div", "rem", "neg", "min",
                       "max", "popc", "clz", "bfind", "fns", "brev", "bfe", "szext", "bmsk",
                       "dp4a", "dp2a")},
    "bfi": frozenset({"f"}),                    # bfi.type f, a, b, c, d: f is the result
    # 9.7.3/9.7.4 floating point
    **{k: _D for k in ("copysign", "fma", "rcp", "rcp.approx.ftz.f64", "sqrt", "rsqrt",
                       "rsqrt.approx.ftz.f64", "sin", "cos", "lg2", "ex2", "tanh")},
    "testp": frozenset({"p"}),
    # 9.7.5/9.7.6 comparison and selection
    "set": _D, "setp": frozenset({"p", "q"}), "selp": _D, "slct": _D,
    # 9.7.7 logic and shift: lop3.BoolOp writes d and predicate p; q is a source predicate
    **{k: _D for k in ("and", "or", "xor", "not", "cnot", "shf", "shl", "shr")},
    "lop3": frozenset({"d", "p"}),
    # 9.7.8 data movement and conversion
    "mov": _D, "shfl": frozenset({"d", "p"}), "shfl.sync": frozenset({"d", "p"}), "prmt": _D,
    "ld": _D, "ld.global.nc": _D, "ldu": _D, "st": frozenset(), "st.async": frozenset(),
    "st.bulk": frozenset(), "multimem.ld_reduce": _D,       # multimem.st/.red: [a], b
    "prefetch": frozenset(), "applypriority": frozenset(), "discard": frozenset(),
    "createpolicy": frozenset({"cache-policy"}), "isspacep": frozenset({"p"}),
    "cvta": frozenset({"p"}),                   # cvta.space.size p, a: p is the address result
    "cvt": _D, "cvt.pack": _D, "mapa": _D, "getctarank": _D,
    "cp.async": frozenset(), "cp.async.commit_group": frozenset(),
    "cp.async.wait_group": frozenset(), "cp.async.bulk": frozenset(),
    "cp.reduce.async.bulk": frozenset(), "cp.async.bulk.prefetch": frozenset(),
    "cp.async.bulk.tensor": frozenset(), "cp.reduce.async.bulk.tensor": frozenset(),
    "cp.async.bulk.prefetch.tensor": frozenset(), "cp.async.bulk.commit_group": frozenset(),
    "cp.async.bulk.wait_group": frozenset(), "tensormap.replace": frozenset(),
    "tensormap.cp_fenceproxy": frozenset(),
    # 9.7.9/9.7.10 texture and surface
    "tex": frozenset({"d", "p"}), "tld4": frozenset({"d", "p"}), "txq": _D,
    "istypep": frozenset({"p"}), "suld": _D, "sust": frozenset(), "sured": frozenset(),
    "suq": _D,
    # 9.7.11 control flow: call's return list is written
    "bra": frozenset(), "brx.idx": frozenset(), "call": frozenset({"ret-param"}),
    "ret": frozenset(), "exit": frozenset(),
    # 9.7.13 parallel synchronisation and communication
    "bar": frozenset({"d", "p"}),               # only the .red forms have d / p
    "bar.warp.sync": frozenset(), "barrier.cluster": frozenset(), "membar": frozenset(),
    "atom": _D, "red": frozenset(), "red.async": frozenset(), "vote": _D, "vote.sync": _D,
    "match.sync": frozenset({"d", "p"}), "activemask": _D, "redux.sync": frozenset({"dst"}),
    "griddepcontrol": frozenset(), "elect.sync": frozenset({"d", "p"}),
    "mbarrier.init": frozenset(), "mbarrier.inval": frozenset(),
    "mbarrier.expect_tx": frozenset(), "mbarrier.complete_tx": frozenset(),
    "mbarrier.arrive": frozenset({"state"}), "mbarrier.arrive_drop": frozenset({"state"}),
    "mbarrier.test_wait": frozenset({"waitComplete"}),     # its "state" operand is a source
    "mbarrier.pending_count": frozenset({"count"}),        # count, state: state is a source
    "cp.async.mbarrier.arrive": frozenset(),
    # 9.7.14 warp-level matrix instructions
    "wmma.load": frozenset({"r"}), "wmma.store": frozenset(), "wmma.mma": _D, "mma": _D,
    "mma.sp": _D, "ldmatrix": frozenset({"r"}), "stmatrix": frozenset(), "movmatrix": _D,
    # 9.7.15 warpgroup-level matrix instructions
    "wgmma.mma_async": _D, "wgmma.mma_async.sp": _D, "wgmma.fence": frozenset(),
    "wgmma.commit_group": frozenset(), "wgmma.wait_group": frozenset(),
    # 9.7.16 tcgen05: ld writes r and, with .red, redval (9.7.16.8.3); mma writes tensor memory
    "tcgen05.alloc": frozenset(), "tcgen05.ld": frozenset({"r", "redval"}),
    "tcgen05.st": frozenset(), "tcgen05.cp": frozenset(), "tcgen05.shift": frozenset(),
    "tcgen05.commit": frozenset(), "tcgen05.wait": frozenset(), "tcgen05.fence": frozenset(),
    "tcgen05.mma": frozenset(), "tcgen05.mma.sp": frozenset(), "tcgen05.mma.ws": frozenset(),
    "tcgen05.mma.ws.sp": frozenset(),
    # 9.7.17 stack manipulation
    "alloca": frozenset({"ptr"}), "stacksave": _D, "stackrestore": frozenset(),
    # 9.7.18 video (d.dsel / d.mask merge with c: d is written whole)
    **{k: _D for k in ("vop", "vop2", "vop4", "vset", "vset2", "vset4", "vsh", "vmad")},
    # 9.7.19 miscellaneous
    "brkpt": frozenset(), "nanosleep": frozenset(), "pmevent": frozenset(), "trap": frozenset(),
    "setmaxnreg": frozenset(),
    "clusterlaunchcontrol.query_cancel": frozenset({"pred", "xdim", "ydim", "zdim", "reg"}),
    "clusterlaunchcontrol.try_cancel": frozenset(),
}

#: Operand names the manual requires to be immediates (constants).
IMMEDIATES = {
    "immAlign": "8", "imm-reg-count": "128", "immHalfSplitoff": "16", "immLut": "0x96",
    "N": "0", "imm-scale-a": "1", "imm-scale-b": "1", "imm-trans-a": "0", "imm-trans-b": "0",
    "byte-id-a": "0", "thread-id-a": "0", "byte-id-b": "0", "thread-id-b": "0",
    "initval": "0", "scale-input-d": "0", "sp-sel": "0", "fraction": "0.5", "ord": "0",
}
#: Per instruction: further names that are immediates there.
FILE_IMMEDIATES = {
    "mma.sp": {"f"},                                     # the sparsity selector
    "applypriority": {"size"}, "discard": {"size"},      # must be 128
    "membar": {"size"}, "tensormap.cp_fenceproxy": {"size"},
    "pmevent": {"a"},
}
IMMEDIATE_VALUES = {"size": "128", "a": "1", "f": "0"}

#: Names that are labels or symbols, not registers.
LABELS = {"tgt": "L_tgt", "tlist": "L_tlist", "func": "f_callee", "flist": "L_flist",
          "fproto": "L_proto"}

#: Vector operands: (names that are vectors only with a .v2/.v4/.v8 modifier, names that always
#: are). A name in a literal {..} of the syntax is a vector member, not listed here.
VECTORS = {
    "ld": ({"d"}, set()), "ld.global.nc": ({"d"}, set()), "ldu": ({"d"}, set()),
    "st": ({"b"}, set()), "st.async": ({"b"}, set()), "atom": ({"d", "b"}, set()),
    "red": ({"b"}, set()), "multimem.ld_reduce": ({"d", "b"}, set()),
    "suld": ({"d"}, {"b"}), "sust": ({"c"}, {"b"}), "sured": (set(), {"b"}),
    "tex": (set(), {"d", "c", "e", "dPdx", "dPdy"}), "tld4": (set(), {"d", "c", "e"}),
    "mma": (set(), {"d", "a", "b", "c"}), "mma.sp": (set(), {"d", "a", "b", "c"}),
    "wmma.mma": (set(), {"d", "a", "b", "c"}), "wmma.load": (set(), {"r"}),
    "wmma.store": (set(), {"r"}), "ldmatrix": (set(), {"r"}), "stmatrix": (set(), {"r"}),
    "wgmma.mma_async": (set(), {"d", "a"}), "wgmma.mma_async.sp": (set(), {"d", "a"}),
    "tcgen05.ld": (set(), {"r"}), "tcgen05.st": (set(), {"r"}),
    **{k: (set(), {"disable-output-lane"}) for k in ("tcgen05.mma", "tcgen05.mma.sp")},
    **{k: (set(), {"tensorCoords", "im2colInfo"}) for k in (
        "cp.async.bulk.tensor", "cp.async.bulk.prefetch.tensor",
        "cp.reduce.async.bulk.tensor")},
}

#: Vector operands that are register tuples (SPEC section 2: vectors of load/store/texture
#: instructions, tensor-core fragments). TMA coordinates, cvt's source vector and
#: clusterlaunchcontrol's result are not.
TUPLES = {
    "ld": {"d"}, "ld.global.nc": {"d"}, "ldu": {"d"}, "st": {"b"}, "st.async": {"b"},
    "atom": {"d", "b"}, "red": {"b"}, "multimem.ld_reduce": {"d", "b"}, "suld": {"d", "b"},
    "sust": {"c", "b"}, "sured": {"b"}, "tex": {"d", "c", "e", "dPdx", "dPdy"},
    "tld4": {"d", "c", "e"}, "mma": {"d", "a", "b", "c"}, "mma.sp": {"d", "a", "b", "c"},
    "wmma.mma": {"d", "a", "b", "c"}, "wmma.load": {"r"}, "wmma.store": {"r"},
    "ldmatrix": {"r"}, "stmatrix": {"r"}, "wgmma.mma_async": {"d", "a"},
    "wgmma.mma_async.sp": {"d", "a"}, "tcgen05.ld": {"r"}, "tcgen05.st": {"r"},
    "tcgen05.mma": {"disable-output-lane"}, "tcgen05.mma.sp": {"disable-output-lane"},
}

#: Names declared as predicates / 64-bit / 128-bit registers (everything else is .b32). The
#: parser does not type-check, so this is for realism only.
PREDICATES = {"p", "q", "c", "pred", "waitComplete", "scale-d", "enable-input-d", "ignore-src"}
PRED_FILES = {"p": {"setp", "bar", "shfl", "shfl.sync", "elect.sync", "match.sync", "lop3",
                    "testp", "isspacep", "istypep", "tex", "tld4"},
              "q": {"setp", "lop3"}, "c": {"set", "setp", "selp", "bar"},
              "a": {"vote", "vote.sync"}}
WIDE = {"cache-policy", "a-desc", "b-desc", "fptr", "access-property", "zero-column-mask-desc",
        "s-desc", "state", "ptr", "sp-meta"}

# Heads (first opcode component) a syntax file may use besides its own.
_EXTRA_HEADS = {"bar": {"barrier"}, "membar": {"fence"}, "prefetch": {"prefetchu"},
                "vsh": {"vop"}}

#: Forms that fail for a known reason outside the ISA table. Each entry: (regular expression
#: over the generated instruction text, regular expression the failure must match — any other
#: failure of the form is a real one —, the owner and the reason). A form that matches but
#: passes is not reported.
KNOWN_GAPS = [
    (r"^v(add|sub|absdiff|min|max|shl|shr|set|mad)[24]?\.\S+\s+%r\d+\.(b[0-3]+|h[01]+)\b",
     r"^destinations counted as read: \['%r0'\]",
     "instruction.set_roles",
     "a selector on a video destination (d.dsel, d.mask) is treated as a partial write, so d "
     "is also counted as used; the manual (9.7.18.1 optMerge, 9.7.18.2) writes all of d"),
]

# --------------------------------------------------------------------------------------------
# Reading the syntax files
# --------------------------------------------------------------------------------------------

_SET_DEF = re.compile(r"^\s*((?:(?:\.|::)?[A-Za-z_][\w:\-]*\s*=\s*)+)\{")
_FORM_HEAD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?=[.{\s;])")


def _strip_comment(line: str) -> str:
    i = line.find("//")
    return line if i < 0 else line[:i]


def read_syntax(path: Path) -> tuple[list[tuple[str, dict]], dict]:
    """The forms of one syntax file, each with the modifier sets of its section, and the sets
    of the whole file (a fallback where a section leaves a modifier undefined)."""
    stem = path.stem
    heads = {stem.split(".")[0]} | _EXTRA_HEADS.get(stem, set())
    lines = [_strip_comment(x).rstrip() for x in path.read_text().splitlines()]
    forms: list[tuple[str, int]] = []          # (form text, section index)
    sections: list[dict] = [{}]
    file_sets: dict[str, list[str]] = {}
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("---"):
            sections.append({})
            i += 1
            continue
        m = _SET_DEF.match(line)
        if m:
            text = line
            while "}" not in text and i + 1 < len(lines):
                i += 1
                text += " " + lines[i].strip()
            names = [n.strip() for n in m.group(1).split("=") if n.strip()]
            inner = text[text.index("{") + 1:text.index("}")]
            values = [v.strip().rstrip("*") for v in re.split(r"[,\s]+", inner) if v.strip()]
            values = [v for v in values if v not in ("where", "x,y", "are", "from")]
            for n in names:
                if n.startswith("."):       # "addr_mode_1" in txq's list lacks its dot
                    values = ["." + v if v[0].isalpha() else v for v in values]
                sections[-1][n] = values
                file_sets.setdefault(n, values)
            i += 1
            continue
        hm = _FORM_HEAD.match(line)
        if hm and hm.group(1) in heads | {"vop", "vop2", "vop4"} and not line.startswith(
                tuple(f"{h} =" for h in heads)):
            text = line
            while not text.endswith(";") and i + 1 < len(lines):
                i += 1
                text += " " + lines[i].strip()
            forms.append((text, len(sections) - 1))
        i += 1
    return [(f, sections[s]) for f, s in forms], file_sets


class _Sets:
    """Modifier values of one form: its section's sets, then the file's."""

    def __init__(self, section: dict, file_sets: dict, pick: int):
        self.section = section
        self.file_sets = file_sets
        self.pick = pick

    def get(self, name: str) -> str | None:
        vals = self.section.get(name) or self.file_sets.get(name)
        if not vals:
            return None
        v = vals[0] if self.pick == 0 else vals[-1]
        return "" if v == "none" else v

    def expand(self, text: str, depth: int = 0) -> str:
        """Replace every modifier-set name in ``text`` (".type", "::op", "vop") by a value."""
        if depth > 4:
            return text
        out = []
        for comp in re.findall(r"\.?[^.]+", text):
            val = self.get(comp) if comp not in ("", ".") else None
            if val is None:
                # names inside a value such as ".collector::buffer::op"
                sub = re.sub(r"::(\w+)", lambda m: (self.get("::" + m.group(1))
                                                    or "::" + m.group(1)), comp)
                out.append(sub)
            elif val != comp:
                out.append(self.expand(val, depth + 1))
            else:
                out.append(val)
        return "".join(out)


def _normalize(form: str) -> str:
    """The form without its ';', with "op. vec_16_bit" (a stray space) closed up."""
    return re.sub(r"\.\s+(?=[A-Za-z_])", ".", form.strip().rstrip(";").strip())


def concrete_opcode(template: str, sets: _Sets, optional: bool) -> str:
    head = re.match(r"[A-Za-z_]\w*", template).group(0)
    out = sets.get(head) or head
    for opt, part in re.findall(r"\{([^}]*)\}|(\.[^.{]+)", template[len(head):]):
        if opt:
            if optional:
                out += sets.expand(opt)
        else:
            out += sets.expand(part)
    return out


def _is_optional_group(content: str) -> bool:
    c = content.strip()
    return not c or c[0] in ",|!-." or c.endswith(",")


def resolve_optionals(text: str, include) -> str:
    """Keep or drop each optional ``{...}`` group of an operand template (``include`` decides
    per group content); literal vectors ``{a, b}`` stay."""
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "{":
            out.append(ch)
            i += 1
            continue
        depth, j = 0, i
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        inner = text[i + 1:j]
        if _is_optional_group(inner):
            if include(inner.strip()):
                out.append(resolve_optionals(inner, include))
        else:
            out.append("{" + resolve_optionals(inner, include) + "}")
        i = j + 1
    return "".join(out)


def split_top(text: str) -> list[str]:
    out, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:k])
            start = k + 1
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


# --------------------------------------------------------------------------------------------
# Building concrete instructions
# --------------------------------------------------------------------------------------------

class Built:
    """One concrete instruction and what the test expects of it."""

    def __init__(self, stem: str, form: str, variant: str):
        self.stem = stem
        self.form = form
        self.variant = variant
        self.text = ""
        self.decls: dict[str, str] = {}     # register name -> type
        self.role: dict[str, str] = {}      # register name -> operand name of the syntax
        self.vectors: list[tuple[str, str]] = []   # (operand name, vector text)
        self.scale_d: str | None = None
        self.counter = Counter()

    def reg(self, name: str, kind: str) -> str:
        prefix, ptype = {"pred": ("%p", ".pred"), "wide": ("%rd", ".b64"),
                         "b128": ("%q", ".b128")}.get(kind, ("%r", ".b32"))
        n = self.counter[prefix]
        self.counter[prefix] += 1
        rname = f"{prefix}{n}"
        self.decls[rname] = ptype
        self.role[rname] = name
        return rname

    def ptx(self, guard: bool) -> str:
        groups: dict[str, list[str]] = {}
        for r, t in self.decls.items():
            groups.setdefault(t, []).append(r)
        decl = "\n".join(f"\t.reg {t} {', '.join(rs)};" for t, rs in groups.items())
        g = "@%pg " if guard else ""
        return (".version 9.0\n.target sm_100a\n.address_size 64\n"
                ".extern .func f_callee;\n"
                ".entry t()\n{\n\t.reg .pred %pg;\n" + decl + "\n"
                "L_tlist: .branchtargets L_tgt;\n"
                "L_flist: .calltargets f_callee;\n"
                "L_proto: .callprototype (.param .b32 _) _ (.param .b32 _);\n"
                f"\t{g}{self.text}\n"
                "L_tgt:\n\tret;\n}\n")


def _kind(stem: str, name: str) -> str:
    if name in WIDE:
        return "wide"
    if name == "try_cancel_response":
        return "b128"
    if name in PRED_FILES and stem in PRED_FILES[name]:
        return "pred"
    if name in PREDICATES and name not in PRED_FILES:
        return "pred"
    return "b32"


def build(stem: str, form: str, sets: _Sets, include) -> Built | None:
    """A concrete instruction for one syntax form, or None where the form has no operand text
    this builder understands."""
    m = re.match(r"(\S+)\s*(.*)$", _normalize(form), re.S)
    opcode = concrete_opcode(m.group(1), sets, include("{.mod}"))
    b = Built(stem, form, "")
    vec_mod = re.search(r"\.v(2|4|8)(?=\.|$)", opcode)
    vec_if, vec_always = VECTORS.get(stem, (set(), set()))
    imms = FILE_IMMEDIATES.get(stem, set())

    def vector(name: str) -> str:
        n = int(vec_mod.group(1)) if (vec_mod and name in vec_if) else (
            2 if name in ("c", "e", "dPdx", "dPdy", "tensorCoords", "im2colInfo", "b") else 4)
        items = [b.reg(name, "b32") for _ in range(n)]
        s = "{" + ", ".join(items) + "}"
        b.vectors.append((name, s))
        return s

    def operand(tok: str, in_vector: bool = False) -> str:
        tok = tok.strip()
        if tok.startswith("["):
            close = tok.rindex("]")
            parts = split_top(tok[1:close])
            first = operand_name(parts[0], address=True)
            return "[" + ", ".join([first] + [operand(p) for p in parts[1:]]) + "]" + \
                sets.expand(tok[close + 1:])
        if tok.startswith("{"):
            return "{" + ", ".join(operand(p, True) for p in split_top(tok[1:-1])) + "}"
        if tok.startswith("("):
            return "(" + ", ".join(operand(p) for p in split_top(tok[1:-1])) + ")"
        if tok[0] in "!-":
            return tok[0] + operand(tok[1:])
        if "|" in tok:
            a, c = tok.split("|", 1)
            return operand(a) + "|" + operand(c)
        name, dot, sel = tok.partition(".")
        base = operand_name(name, in_vector=in_vector)
        return base + (sets.expand("." + sel) if dot else "")

    def operand_name(name: str, address: bool = False, in_vector: bool = False) -> str:
        if name == "_":
            return "_"
        if re.fullmatch(r"-?\d+", name):
            return name
        if name in ("ret-param", "param-list"):
            return b.reg(name, "b32")
        if name in LABELS:
            return LABELS[name]
        if name in imms:
            return IMMEDIATE_VALUES.get(name, "0")
        if name in IMMEDIATES and not address:
            return IMMEDIATES[name]
        val = sets.get(name)
        if val is not None and not address:          # cp-size = { 4, 8, 16 }
            return val
        if address:
            return b.reg(name, "wide")
        if not in_vector and (name in vec_always or (vec_mod and name in vec_if)):
            return vector(name)
        if name == "scale-d":
            b.scale_d = b.reg(name, "pred")
            return b.scale_d
        return b.reg(name, _kind(stem, name))

    ops_text = resolve_optionals(m.group(2), include)
    ops = [operand(t) for t in split_top(ops_text)]
    b.text = opcode + ("\t" + ", ".join(ops) if ops else "") + ";"
    return b


def _safe_include(stem: str):
    """Include every optional part except those a known parser gap cannot read."""
    simd_video = stem in ("vop2", "vop4", "vset2", "vset4")

    def inc(content: str) -> bool:
        if content in (".unified", "-"):
            return False
        if content == "|p" and stem in ("tex", "tld4"):
            return False
        if simd_video and content in (".asel", ".bsel", ".mask"):
            return False
        return True
    return inc


def variants(stem: str, form: str, section: dict, file_sets: dict):
    """Every concrete instruction the test checks for one form: optional parts dropped, all
    included, all but the known parser gaps included; first and last modifier values;
    ``wgmma`` also with scale-d the literals 0 and 1."""
    out = []
    seen = set()
    policies = [("drop", lambda c: False), ("all", lambda c: True),
                ("safe", _safe_include(stem))]
    for pick in (0, 1):
        sets = _Sets(section, file_sets, pick)
        for pname, inc in policies:
            b = build(stem, form, sets, inc)
            if b is None or b.text in seen:
                continue
            seen.add(b.text)
            b.variant = f"{pname}-{'first' if pick == 0 else 'last'}"
            out.append(b)
            if b.scale_d is not None and pname == "drop":
                for lit in ("0", "1"):
                    c = build(stem, form, sets, inc)
                    c.text = re.sub(re.escape(c.scale_d) + r"(?=[,;])", lit, c.text, count=1)
                    del c.decls[c.scale_d], c.role[c.scale_d]
                    c.scale_d = lit
                    c.variant = f"{b.variant}-scale{lit}"
                    out.append(c)
    return out


def syntax_files() -> list[Path]:
    if not SYNTAX_DIR.is_dir():
        return []
    return sorted(SYNTAX_DIR.glob("*.txt"))


def all_cases():
    cases = []
    for path in syntax_files():
        forms, file_sets = read_syntax(path)
        for k, (form, section) in enumerate(forms):
            for b in variants(path.stem, form, section, file_sets):
                cases.append(pytest.param(b, id=f"{path.stem}:{k}:{b.variant}"))
    return cases


def _reads_destination(b: Built, name: str) -> bool:
    """Destinations the instruction also reads (PTX ISA): wgmma.mma_async's accumulator d
    unless scale-d is the literal 0 ("D = A*B is issued when the input predicate argument
    scale-d is false")."""
    return b.stem.startswith("wgmma.mma_async") and name == "d" and b.scale_d != "0"


# --------------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------------

needs_syntax = pytest.mark.skipif(not SYNTAX_DIR.is_dir(),
                                  reason=f"PTX syntax folder {SYNTAX_DIR} is absent")


@needs_syntax
def test_every_syntax_file_has_a_reviewed_entry():
    stems = {p.stem for p in syntax_files()}
    assert stems - DESTINATIONS.keys() == set(), "review these instructions and add them"
    assert DESTINATIONS.keys() - stems == set()


@needs_syntax
@pytest.mark.parametrize("path", syntax_files(), ids=lambda p: p.stem)
def test_every_form_opcode_is_known(path):
    forms, file_sets = read_syntax(path)
    assert forms, f"no syntax form read from {path.name}"
    for form, section in forms:
        for pick in (0, 1):
            for optional in (False, True):
                opcode = concrete_opcode(_normalize(form).split()[0],
                                         _Sets(section, file_sets, pick), optional)
                instr = Instruction(opcode, [])
                isa.classify(instr, RegTable())
                assert instr.known, f"{opcode} (from '{form}') is not known"


def _known_gap(text: str, error: str) -> str | None:
    for pattern, failure, owner, reason in KNOWN_GAPS:
        if re.search(pattern, text) and re.search(failure, error):
            return f"known gap ({owner}): {reason}"
    return None


def check_built(b: Built, guard: bool) -> None:
    module = parse(b.ptx(guard))
    fn = module.functions[0]
    instr = next(iter(fn.instructions()))
    assert instr.known, f"opcode {instr.opcode} not known"
    dests = DESTINATIONS[b.stem]
    names = fn.regs.names
    want_defs = {r for r, n in b.role.items() if n in dests}
    want_uses = {r for r, n in b.role.items() if n not in dests or _reads_destination(b, n)}
    if guard:
        want_uses.add("%pg")
    got_defs = {names[v] for v in instr.defs}
    got_uses = {names[v] for v in instr.uses}
    assert got_defs == want_defs, f"defs {sorted(got_defs)} != {sorted(want_defs)}"
    missing = want_uses - got_uses
    assert not missing, f"uses lack {sorted(missing)}"
    extra = got_uses - want_uses
    assert not extra, f"destinations counted as read: {sorted(extra)}"
    # register tuples
    tup_names = TUPLES.get(b.stem, set())
    want_tuples = sorted(s for n, s in b.vectors if n in tup_names)
    got_tuples = sorted(v.render(lambda i: names[i]) for v, _ in isa.tuple_operands(instr, fn.regs))
    assert got_tuples == want_tuples, f"tuples {got_tuples} != {want_tuples}"


@needs_syntax
@pytest.mark.parametrize("b", all_cases())
def test_syntax_form_roles(b):
    guard = b.variant.endswith("last") or "last-" in b.variant
    try:
        check_built(b, guard)
    except (AssertionError, PtxSyntaxError) as e:
        gap = _known_gap(b.text, str(e))
        if gap:
            pytest.xfail(f"{gap}: {b.text}")
        raise AssertionError(f"{b.text}\n  from '{b.form}'\n  {e}") from e


def coverage() -> dict:
    """How many forms of how many instructions the synthetic test builds and passes."""
    files = syntax_files()
    forms_total = forms_built = forms_clean = cases = failed = 0
    per_file_ok = 0
    gaps = Counter()
    for path in files:
        forms, file_sets = read_syntax(path)
        file_ok = True
        for form, section in forms:
            forms_total += 1
            vs = variants(path.stem, form, section, file_sets)
            if vs:
                forms_built += 1
            clean = True
            for b in vs:
                cases += 1
                try:
                    check_built(b, b.variant.endswith("last") or "last-" in b.variant)
                except (AssertionError, PtxSyntaxError) as e:
                    g = _known_gap(b.text, str(e))
                    gaps[g or "UNEXPECTED"] += 1
                    clean = False
                    if not g:
                        failed += 1
            forms_clean += clean
            file_ok &= clean
        per_file_ok += file_ok
    return {"instructions": len(files), "instructions_all_forms_pass": per_file_ok,
            "forms": forms_total, "forms_built": forms_built,
            "forms_every_variant_passes": forms_clean, "instructions_checked": cases,
            "unexpected_failures": failed, "known_gaps": dict(gaps)}


@needs_syntax
def test_coverage():
    c = coverage()
    print(json.dumps(c, indent=1))
    assert c["forms_built"] == c["forms"]
    assert c["unexpected_failures"] == 0
    assert c["forms"] >= 500 and c["instructions"] >= 160


# --------------------------------------------------------------------------------------------
# Specific semantics, from the manual, on real-looking instructions
# --------------------------------------------------------------------------------------------

_DECLS = """\t.reg .b32 %r<40>;\n\t.reg .b64 %rd<20>;\n\t.reg .pred %p<10>;
\t.reg .f32 %f<40>;\n\t.reg .f64 %fd<10>;\n\t.reg .b16 %h<10>;\n\t.reg .f16x2 %hh<10>;
\t.reg .b128 %q<4>;"""


def one(text: str):
    m = parse(".version 9.0\n.target sm_100a\n.address_size 64\n.extern .func f_callee;\n"
              ".entry t()\n{\n" + _DECLS + "\nL_proto: .callprototype (.param .b32 _) _ "
              "(.param .b32 _);\n\t" + text + "\n\tret;\n}\n")
    fn = m.functions[0]
    instr = next(iter(fn.instructions()))
    names = fn.regs.names
    return (instr, fn.regs, sorted(names[v] for v in instr.defs),
            sorted(names[v] for v in instr.uses))


@pytest.mark.parametrize("text, defs, uses", [
    # tcgen05.ld.red: "The result of the reduction operation is written into ... redVal"
    ("tcgen05.ld.red.sync.aligned.16x32bx2.x2.u32.max {%r1, %r2}, %r3, [%r4], 16;",
     ["%r1", "%r2", "%r3"], ["%r4"]),
    ("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r1, %r2}, [%r4];", ["%r1", "%r2"], ["%r4"]),
    ("tcgen05.st.sync.aligned.16x64b.x2.b32 [%r4], {%r1, %r2};", [], ["%r1", "%r2", "%r4"]),
    ("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r1, 32;", [], ["%r1"]),
    # wgmma: d read unless scale-d is the literal 0; a predicate there reads d
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, "
     "0, 1, 1, 0, 0;", ["%f1", "%f2", "%f3", "%f4"], ["%rd1", "%rd2"]),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, "
     "1, 1, 1, 0, 0;", ["%f1", "%f2", "%f3", "%f4"], ["%f1", "%f2", "%f3", "%f4", "%rd1",
                                                       "%rd2"]),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, "
     "{%r1, %r2, %r3, %r4}, %rd2, %p1, 1, 1, 1;", ["%f1", "%f2", "%f3", "%f4"],
     ["%f1", "%f2", "%f3", "%f4", "%p1", "%r1", "%r2", "%r3", "%r4", "%rd2"]),
    ("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, "
     "%r5, 0, 0, 1, 1, 0, 0;", ["%f1", "%f2", "%f3", "%f4"], ["%r5", "%rd1", "%rd2"]),
    # bar / barrier: only .red defines
    ("bar.sync %r1, %r2;", [], ["%r1", "%r2"]),
    ("barrier.cta.red.popc.aligned.u32 %r1, 0, !%p1;", ["%r1"], ["%p1"]),
    ("bar.red.or.pred %p2, %r1, %r2, %p1;", ["%p2"], ["%p1", "%r1", "%r2"]),
    ("bar.warp.sync %r1;", [], ["%r1"]),
    # vote, shfl, elect, match, lop3
    ("vote.sync.ballot.b32 %r1, !%p1, %r2;", ["%r1"], ["%p1", "%r2"]),
    ("shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, -1;", ["%p1", "%r1"], ["%r2"]),
    ("elect.sync %r1|%p1, -1;", ["%p1", "%r1"], []),
    ("elect.sync _|%p1, %r1;", ["%p1"], ["%r1"]),
    ("match.all.sync.b32 %r1|%p1, %r2, %r3;", ["%p1", "%r1"], ["%r2", "%r3"]),
    ("lop3.or.b32 %r1|%p1, %r2, %r3, %r4, 0x96, %p2;", ["%p1", "%r1"],
     ["%p2", "%r2", "%r3", "%r4"]),
    # mbarrier: state / waitComplete / count are written; test_wait's state is read
    ("mbarrier.arrive.shared::cta.b64 %rd1, [%rd2];", ["%rd1"], ["%rd2"]),
    ("mbarrier.arrive.expect_tx.shared::cluster.b64 _, [%rd2], %r1;", [], ["%r1", "%rd2"]),
    ("mbarrier.test_wait.shared.b64 %p1, [%rd2], %rd1;", ["%p1"], ["%rd1", "%rd2"]),
    ("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%rd2], %r1, %r2;", ["%p1"],
     ["%r1", "%r2", "%rd2"]),
    ("mbarrier.pending_count.b64 %r1, %rd1;", ["%r1"], ["%rd1"]),
    ("mbarrier.init.shared.b64 [%rd1], %r1;", [], ["%r1", "%rd1"]),
    # atom (vector too) defines d; red / st / st.async / red.async / multimem.st define nothing
    ("atom.global.v2.f32.add {%f1, %f2}, [%rd1], {%f3, %f4};", ["%f1", "%f2"],
     ["%f3", "%f4", "%rd1"]),
    ("atom.global.cas.b32 %r1, [%rd1], %r2, %r3;", ["%r1"], ["%r2", "%r3", "%rd1"]),
    ("red.global.add.u32 [%rd1+8], %r1;", [], ["%r1", "%rd1"]),
    ("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.inc.u32 "
     "[%r1], %r2, [%r3];", [], ["%r1", "%r2", "%r3"]),
    ("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];",
     ["%f1", "%f2", "%f3", "%f4"], ["%rd1"]),
    ("multimem.st.relaxed.sys.global.v2.f32 [%rd1], {%f1, %f2};", [], ["%f1", "%f2", "%rd1"]),
    # the stack, address spaces, cluster, policies
    ("alloca.u64 %rd1, %rd2, 8;", ["%rd1"], ["%rd2"]),
    ("stacksave.u64 %rd1;", ["%rd1"], []),
    ("stackrestore.u64 %rd1;", [], ["%rd1"]),
    ("isspacep.shared %p1, %rd1;", ["%p1"], ["%rd1"]),
    ("getctarank.shared::cluster.u32 %r1, %rd1;", ["%r1"], ["%rd1"]),
    ("mapa.shared::cluster.u64 %rd1, %rd2, %r1;", ["%rd1"], ["%r1", "%rd2"]),
    ("createpolicy.fractional.L2::evict_last.b64 %rd1, 1.0;", ["%rd1"], []),
    ("prefetch.global.L2 [%rd1];", [], ["%rd1"]),
    ("applypriority.global.L2::evict_normal [%rd1], 128;", [], ["%rd1"]),
    ("discard.global.L2 [%rd1], 128;", [], ["%rd1"]),
    ("setmaxnreg.inc.sync.aligned.u32 240;", [], []),
    ("clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {%r1, %r2, %r3, _}, %q1;",
     ["%r1", "%r2", "%r3"], ["%q1"]),
    ("clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p1, %q1;", ["%p1"], ["%q1"]),
    # video: d.dsel is written whole (9.7.18.1 optMerge); c is read
    ("vadd.s32.s32.s32.sat.add %r1, %r2.b0, %r3.b1, %r4;", ["%r1"], ["%r2", "%r3", "%r4"]),
    # carry chains: the carry flag is not a register
    ("add.cc.u32 %r1, %r2, %r3;", ["%r1"], ["%r2", "%r3"]),
    ("addc.cc.u32 %r4, %r5, %r6;", ["%r4"], ["%r5", "%r6"]),
    ("mad.lo.cc.u32 %r1, %r2, %r3, %r4;", ["%r1"], ["%r2", "%r3", "%r4"]),
    # packing, bit ops, dot products
    ("cvt.pack.sat.u8.s32.b32 %r1, %r2, %r3, %r4;", ["%r1"], ["%r2", "%r3", "%r4"]),
    ("cvt.rs.relu.satfinite.e4m3x4.f32 %r1, {%f1, %f2, %f3, %f4}, %r2;", ["%r1"],
     ["%f1", "%f2", "%f3", "%f4", "%r2"]),
    ("prmt.b32.f4e %r1, %r2, %r3, %r4;", ["%r1"], ["%r2", "%r3", "%r4"]),
    ("bfi.b32 %r1, %r2, %r3, %r4, %r5;", ["%r1"], ["%r2", "%r3", "%r4", "%r5"]),
    ("szext.clamp.s32 %r1, %r2, %r3;", ["%r1"], ["%r2", "%r3"]),
    ("bmsk.wrap.b32 %r1, %r2, %r3;", ["%r1"], ["%r2", "%r3"]),
    ("fns.b32 %r1, %r2, %r3, %r4;", ["%r1"], ["%r2", "%r3", "%r4"]),
    ("dp2a.lo.u32.u32 %r1, %r2, %r3, %r4;", ["%r1"], ["%r2", "%r3", "%r4"]),
    ("dp4a.s32.s32 %r1, %r2, %r3, %r4;", ["%r1"], ["%r2", "%r3", "%r4"]),
    # textures and surfaces
    ("tex.2d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r1, %r2}];",
     ["%f1", "%f2", "%f3", "%f4"], ["%r1", "%r2", "%rd1"]),
    ("txq.level.width.b32 %r1, [%rd1], %r2;", ["%r1"], ["%r2", "%rd1"]),
    ("suld.b.2d.v2.b32.trap {%r1, %r2}, [%rd1, {%r3, %r4}];", ["%r1", "%r2"],
     ["%r3", "%r4", "%rd1"]),
    ("sust.b.1d.v2.b32.trap [%rd1, {%r3}], {%r1, %r2};", [], ["%r1", "%r2", "%r3", "%rd1"]),
    ("sured.b.add.1d.u32.trap [%rd1, {%r3}], %r1;", [], ["%r1", "%r3", "%rd1"]),
    ("suq.width.b32 %r1, [%rd1];", ["%r1"], ["%rd1"]),
    # matrices
    ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];",
     ["%r1", "%r2", "%r3", "%r4"], ["%r5"]),
    ("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r5], {%r1, %r2};", [], ["%r1", "%r2", "%r5"]),
    ("movmatrix.sync.aligned.m8n8.trans.b16 %r1, %r2;", ["%r1"], ["%r2"]),
    ("cp.async.ca.shared.global [%r1], [%rd1], 4, %r2;", [], ["%r1", "%r2", "%rd1"]),
    # calls: old ABI returns into registers
    ("call.uni (%fd2), f_callee, (%rd8);", ["%fd2"], ["%rd8"]),
    ("call (%r1), %rd1, (%r2, %r3), L_proto;", ["%r1"], ["%r2", "%r3", "%rd1"]),
])
def test_semantics(text, defs, uses):
    instr, _, got_defs, got_uses = one(text)
    assert instr.known
    assert got_defs == sorted(defs)
    assert got_uses == sorted(uses)


def test_classify_again_sets_every_role_afresh():
    """Classifying an instruction again (a pass rewriting its operands, the checker's copies)
    leaves nothing of its earlier roles: the plain path (``set_plain_roles``) sets ``defs``
    and ``uses`` whole, also when the first operand is now read (a store)."""
    for text in ("st.global.f32 [%rd1], %r1;", "add.s32 %r1, %r2, %r3;",
                 "@%p1 st.global.f32 [%rd1+4], %r2;"):
        instr, regs, defs, uses = one(text)
        fresh = (instr.roles, instr.defs, instr.uses, instr.is_copy)
        instr.defs, instr.uses, instr.roles = (0, 1), (2,), (1, 1)
        instr.is_copy = False
        isa.classify(instr, regs)
        assert (instr.roles, instr.defs, instr.uses, instr.is_copy) == fresh, text


def test_unknown_opcode_is_used_and_defined():
    instr, _, defs, uses = one("frobnicate.b32 %r1, %r2, [%rd1];")
    assert not instr.known
    assert defs == ["%r1", "%r2"] and uses == ["%r1", "%r2", "%rd1"]


# --------------------------------------------------------------------------------------------
# Register tuples (SPEC section 2) and asynchronous operands
# --------------------------------------------------------------------------------------------

def tuples(text: str, with_regs: bool = True) -> list[tuple[str, int]]:
    instr, regs, _, _ = one(text)
    names = regs.names
    return [(v.render(lambda i: names[i]), a)
            for v, a in isa.tuple_operands(instr, regs if with_regs else None)]


@pytest.mark.parametrize("text, want", [
    ("ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];", [("{%f1, %f2, %f3, %f4}", 4)]),
    ("ld.global.v2.f32 {%f1, %f2}, [%rd1+8];", [("{%f1, %f2}", 2)]),
    ("ld.global.v4.f32 {%f1, _, %f2, _}, [%rd1];", [("{%f1, _, %f2, _}", 4)]),
    # a .v2.f64 access is 128 bits: four registers, 4-aligned
    ("st.v2.f64 [%rd1], {%fd1, %fd2};", [("{%fd1, %fd2}", 4)]),
    ("st.global.v4.b16 [%rd1], {%h1, %h2, %h3, %h4};", [("{%h1, %h2, %h3, %h4}", 2)]),
    ("ld.shared.v2.b16 {%h1, %h2}, [%rd1];", [("{%h1, %h2}", 1)]),
    ("st.global.v2.f32 [%rd1], {0f00000000, 0f00000000};", []),
    # texture: the destination and the coordinate vector
    ("tex.2d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r1, %r2}];",
     [("{%f1, %f2, %f3, %f4}", 4), ("{%r1, %r2}", 2)]),
    ("tex.3d.v4.s32.f32 {%r1, %r2, %r3, %r4}, [%rd1, {%f1, %f2, %f3, %f4}];",
     [("{%r1, %r2, %r3, %r4}", 4), ("{%f1, %f2, %f3, %f4}", 4)]),
    # mma.sync m16n8k16: accumulators 4, A 4 registers, B 2
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, "
     "{%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};",
     [("{%f1, %f2, %f3, %f4}", 4), ("{%r1, %r2, %r3, %r4}", 4), ("{%r5, %r6}", 2),
      ("{%f5, %f6, %f7, %f8}", 4)]),
    ("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%fd1, %fd2}, {%fd3}, {%fd4}, "
     "{%fd5, %fd6};",
     [("{%fd1, %fd2}", 4), ("{%fd3}", 2), ("{%fd4}", 2), ("{%fd5, %fd6}", 4)]),
    # block-scale selectors are immediates, not tuples
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0 "
     "{%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8}, %r7, "
     "{0, 0}, %r8, {0, 0};",
     [("{%f1, %f2, %f3, %f4}", 4), ("{%r1, %r2, %r3, %r4}", 4), ("{%r5, %r6}", 2),
      ("{%f5, %f6, %f7, %f8}", 4)]),
    # wmma: 8-register fragments on 4-register boundaries (seed 000, WMMA row)
    ("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, "
     "%f8}, {%hh1, %hh2, %hh3, %hh4, %hh5, %hh6, %hh7, %hh8}, {%r1, %r2, %r3, %r4, %r5, %r6, "
     "%r7, %r8}, {%f9, %f10, %f11, %f12, %f13, %f14, %f15, %f16};",
     [("{%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}", 4),
      ("{%hh1, %hh2, %hh3, %hh4, %hh5, %hh6, %hh7, %hh8}", 4),
      ("{%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}", 4),
      ("{%f9, %f10, %f11, %f12, %f13, %f14, %f15, %f16}", 4)]),
    ("wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%hh1, %hh2, %hh3, %hh4, %hh5, %hh6, "
     "%hh7, %hh8}, [%rd1], %r1;", [("{%hh1, %hh2, %hh3, %hh4, %hh5, %hh6, %hh7, %hh8}", 4)]),
    # wgmma: 8 (capped by the fragment's own size)
    ("wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, "
     "%f8}, %rd1, %rd2, %p1, 1, 1, 0, 0;", [("{%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}", 8)]),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, "
     "{%r1, %r2, %r3, %r4}, %rd2, 1, 1, 1, 1;",
     [("{%f1, %f2, %f3, %f4}", 4), ("{%r1, %r2, %r3, %r4}", 4)]),
    ("tcgen05.ld.sync.aligned.32x32b.x16.b32 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, "
     "%r10, %r11, %r12, %r13, %r14, %r15, %r16}, [%r20];",
     [("{%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11, %r12, %r13, %r14, %r15, "
       "%r16}", 8)]),
    # ldmatrix .x4 / .x2 / .x1
    ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];",
     [("{%r1, %r2, %r3, %r4}", 4)]),
    ("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r1, %r2}, [%r5];", [("{%r1, %r2}", 2)]),
    ("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r1}, [%r5];", [("{%r1}", 1)]),
    # not tuples
    ("mov.b64 %rd1, {%r1, %r2};", []),
    ("mov.b64 {%r1, %r2}, %rd1;", []),
    ("cvt.rs.relu.satfinite.e4m3x4.f32 %r1, {%f1, %f2, %f3, %f4}, %r2;", []),
    ("call (%r1), f_callee, (%r2, %r3);", []),
    ("cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [%r1], "
     "[%rd1, {%r2, %r3}], [%r4];", []),
])
def test_tuple_operands(text, want):
    assert tuples(text) == want


def test_tuple_operands_texture_destination_with_predicate():
    # tex d|p, [a, c], built directly (the parser's reading of it is in test_syntax_form_roles)
    regs = RegTable()
    ids = [regs.add(f"%f{i}", ".f32", RegClass.GPR32) for i in range(6)]
    p = regs.add("%p1", ".pred", RegClass.PRED)
    rd = regs.add("%rd1", ".b64", RegClass.GPR64)
    d = Vec([Reg(v) for v in ids[:4]])
    coords = Vec([Reg(v) for v in ids[4:]])
    instr = Instruction("tex.2d.v4.f32.f32", [Pair(d, Reg(p)), Mem(Reg(rd), "", [coords])])
    isa.classify(instr, regs)
    assert set(instr.defs) == set(ids[:4]) | {p}
    assert set(instr.uses) == set(ids[4:]) | {rd}
    assert isa.tuple_operands(instr, regs) == [(d, 4), (coords, 2)]


def test_tuple_operands_without_register_table_counts_members():
    assert tuples("st.v2.f64 [%rd1], {%fd1, %fd2};", with_regs=False) == [
        ("{%fd1, %fd2}", 2)]
    assert tuples("ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];", with_regs=False) == [
        ("{%f1, %f2, %f3, %f4}", 4)]


@pytest.mark.parametrize("text, regs, wait", [
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, "
     "%p1, 1, 1, 0, 0;", ["%f1", "%f2", "%f3", "%f4"], "wgmma.wait_group"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, "
     "{%r1, %r2, %r3, %r4}, %rd2, 1, 1, 1, 1;",
     ["%f1", "%f2", "%f3", "%f4", "%r1", "%r2", "%r3", "%r4"], "wgmma.wait_group"),
    ("tcgen05.ld.red.sync.aligned.32x32b.x2.min.f32 {%r1, %r2}, %r3, [%r4];",
     ["%r1", "%r2", "%r3"], "tcgen05.wait::ld"),
    ("tcgen05.st.sync.aligned.16x64b.x2.b32 [%r4], {%r1, %r2};", ["%r1", "%r2"],
     "tcgen05.wait::st"),
    ("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2}, "
     "{%r3}, {%f5, %f6, %f7, %f8};", None, None),
])
def test_async_operands(text, regs, wait):
    instr, table, _, _ = one(text)
    got = isa.async_operands(instr)
    if regs is None:
        assert got is None
    else:
        assert sorted(table.names[v] for v in got[0]) == sorted(regs) and got[1] == wait


# --------------------------------------------------------------------------------------------
# The real-PTX corpus: every opcode known
# --------------------------------------------------------------------------------------------

@pytest.mark.corpus
@pytest.mark.skipif(not (CORPUS_DIR / "MANIFEST.json").is_file(),
                    reason=f"corpus {CORPUS_DIR} is absent")
def test_corpus_opcodes_are_known():
    manifest = json.loads((CORPUS_DIR / "MANIFEST.json").read_text())
    unknown = Counter()
    files = 0
    for entry in manifest["files"]:
        if not entry["ptxas"]["ok"]:
            continue            # ptxas rejects these too
        module = parse_file(str(CORPUS_DIR / entry["path"]))
        files += 1
        for fn in module.functions:
            for instr in fn.instructions():
                if not instr.known:
                    unknown[instr.opcode] += 1
    assert files > 300
    assert not unknown, f"unknown opcodes: {unknown.most_common()}"


if __name__ == "__main__":
    print(json.dumps(coverage(), indent=1))
