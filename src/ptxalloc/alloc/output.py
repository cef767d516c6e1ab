"""Writing an allocated function back as PTX (SPEC section 8; docs/allocated-ptx.md).

Every virtual register is replaced by the physical register of its placement — ``%R<n>``
(``.b32``), ``%RD<n>`` (``.b64``, named by the first register of the pair), ``%RQ<n>``
(``.b128``), ``%H<u>`` (``.b16``, the half unit u), ``%P<n>`` (``.pred``), ``%V<a>x<b>_<u>`` for
vector-typed registers, and for values in the uniform files ``%UR<n>`` (``.b32``), ``%URD<n>``
(``.b64``, the pair URn:URn+1) and ``%UP<n>`` (``.pred``) — under a *stem* inserted after ``%`` that makes the names unable to
clash with anything the input names. The input's ``.reg`` declarations give way to declarations
of the physical registers used; every other directive, label, ``.loc`` line and comment stays in
place; the one ``.local`` spill array is declared when something was spilled. Copies whose two
ends got the same register are removed (written as ``//@removed`` comments), and inserted
instructions carry the ``//@`` comments the checker reads.
"""

from __future__ import annotations

import re

from ..ir.instruction import REG_DECL, DIRECTIVE, COMMENT, Instruction, Label, Raw, Removed
from ..ir.module import Function
from ..ir.operands import Sym
from ..ir.registers import CLASS_BITS, RegClass, RegTable


def choose_stem(fn: Function) -> str:
    """The shortest stem (``""``, ``"x"``, ``"xx"`` ...) whose physical names clash with no
    name the function uses."""
    names: set[str] = set(fn.regs.names)
    for p in fn.params + fn.returns:
        names.add(p.name)
    for s in fn.body:
        if type(s) is Instruction:
            for op in s.ops:
                if type(op) is Sym:
                    names.add(op.text)
        elif type(s) is Label:
            names.add(s.name)
        elif type(s) is Raw and s.kind == DIRECTIVE:
            names.update(re.findall(r"%[\w$]+", s.text))
    stem = ""
    while True:
        pat = re.compile(r"%" + re.escape(stem) + r"U?(?:R|RD|RQ|H|P|V)\d")
        if not any(pat.match(n) for n in names):
            return stem
        stem += "x"


def spill_array_name(fn: Function, base: str) -> str:
    """``base``, or ``base_1``, ``base_2`` ... the first name no directive of the function
    declares (an input that is an earlier run's output declares its own spill array)."""
    names: set[str] = set()
    for s in fn.body:
        if type(s) is Raw and s.kind == DIRECTIVE:
            names.update(re.findall(r"[\w$]+", s.text))
    name, n = base, 0
    while name in names:
        n += 1
        name = f"{base}_{n}"
    return name


def physical_name(regs: RegTable, v: int, start: int, stem: str) -> str:
    """The physical register name of register ``v`` placed at unit ``start`` (module
    docstring: ``%R<n>``, ``%RD<n>``, ``%H<u>``, ``%P<n>`` ... under ``stem``)."""
    c = regs.classes[v]
    vec = regs.vec[v]
    if c == RegClass.PRED:
        return f"%{stem}P{start}"
    if vec > 1:
        return f"%{stem}V{vec}x{CLASS_BITS[c]}_{start}"
    if c == RegClass.H16:
        return f"%{stem}H{start}"
    if c == RegClass.GPR32:
        return f"%{stem}R{start // 2}"
    if c == RegClass.GPR64:
        return f"%{stem}RD{start // 2}"
    return f"%{stem}RQ{start // 2}"


def uniform_name(regs: RegTable, v: int, start: int, stem: str) -> str:
    """The name of register ``v`` placed at ``start`` in a uniform file (:mod:`uniform`):
    ``%UP<n>``, ``%UR<n>`` or ``%URD<n>`` under ``stem``."""
    c = regs.classes[v]
    fam = {RegClass.PRED: "UP", RegClass.GPR32: "UR", RegClass.GPR64: "URD"}[c]
    return f"%{stem}{fam}{start}"


def declarations(names: set[str], stem: str) -> list[str]:
    """The ``.reg`` declarations of the physical registers ``names``: one ranged declaration
    per family up to its highest register, one per vector register."""
    top: dict[str, int] = {}
    vectors: list[str] = []
    pat = re.compile(r"%" + re.escape(stem) + r"(URD|UR|UP|RD|RQ|R|H|P)(\d+)$")
    for n in names:
        m = pat.match(n)
        if m:
            fam, idx = m.group(1), int(m.group(2))
            top[fam] = max(top.get(fam, -1), idx)
        elif n.startswith(f"%{stem}V"):
            vectors.append(n)
    types = {"R": ".b32", "RD": ".b64", "RQ": ".b128", "H": ".b16", "P": ".pred",
             "UR": ".b32", "URD": ".b64", "UP": ".pred"}
    out = [f".reg {types[f]} %{stem}{f}<{top[f] + 1}>;"
           for f in ("P", "H", "R", "RD", "RQ", "UP", "UR", "URD") if f in top]
    for n in sorted(vectors):
        m = re.match(r"%" + re.escape(stem) + r"V(\d+)x(\d+)_\d+$", n)
        out.append(f".reg .v{m.group(1)} .b{m.group(2)} {n};")
    return out


def annotate(ins: Instruction, original: RegTable) -> None:
    """Set the ``//@`` comment of an inserted instruction from its
    :class:`~ptxalloc.ir.edits.Edit`: the kind and the original value (``%r12#37``), the
    register of a callee-saved save/restore, or the kind alone."""
    if ins.origin is not None:
        ins.comment = ins.origin.annotation(original.names)


def build_body(fn: Function, header: str, decls: list[str], array_decl: str | None,
               removed_copies: set[int]) -> list:
    """The statements of the allocated function."""
    body: list = [Raw(COMMENT, header)]
    body.extend(Raw(REG_DECL, d) for d in decls)
    if array_decl:
        body.append(Raw(DIRECTIVE, array_decl))
    for s in fn.body:
        t = type(s)
        if t is Raw and s.kind == REG_DECL:
            continue
        if t is Instruction and id(s) in removed_copies:
            body.append(Removed(s, "copy"))
            continue
        body.append(neutral(s))
    return body


def neutralize(comment: str) -> str:
    """An input's own ``//@`` comment (the input is an earlier run's output) as a plain
    comment, ``// @...``: the annotations of the output are this run's alone, so allocating
    ptxalloc's output again works (docs/allocated-ptx.md, "Allocating an allocated file")."""
    return "// @" + comment[3:]


def neutral(s):
    """Statement ``s`` with an input's own ``//@`` comment neutralized (``s`` itself when it
    carries none; an instruction this run inserted keeps its annotation)."""
    t = type(s)
    if t is Instruction and s.origin is None and s.comment.startswith("//@"):
        s = s.copy_with(list(s.ops))
        s.comment = neutralize(s.comment)
    elif t is Raw and s.kind == COMMENT and s.text.startswith("//@"):
        s = Raw(COMMENT, neutralize(s.text), s.line)
    return s


SCHEDULE_TOKENS_PER_LINE = 32


def schedule_lines(order: list[int]) -> list[str]:
    """The ``//@schedule`` comment lines recording an instruction order (docs/allocated-ptx.md,
    "Scheduled functions"): original instruction indices in their new order, an ascending run
    a, a+1 .. b written ``a-b``."""
    tokens = []
    k = 0
    n = len(order)
    while k < n:
        e = k
        while e + 1 < n and order[e + 1] == order[e] + 1:
            e += 1
        tokens.append(f"{order[k]}-{order[e]}" if e > k else str(order[k]))
        k = e + 1
    return ["//@schedule " + " ".join(tokens[i:i + SCHEDULE_TOKENS_PER_LINE])
            for i in range(0, len(tokens), SCHEDULE_TOKENS_PER_LINE)]


def hoist_lines(groups: list[tuple[int, str, list[int]]]) -> list[str]:
    """The ``//@hoist`` comment lines recording loop-invariant hoisting (docs/allocated-ptx.md,
    "Hoisted and promoted functions"): per loop, the anchor instruction's index, ``<`` (before
    it) or ``>`` (after it), and the indices of the instructions moved there, in order."""
    return [f"//@hoist {anchor}{side} " + " ".join(map(str, moved))
            for anchor, side, moved in groups]


def promote_lines(arrays: list[str]) -> list[str]:
    """The ``//@promote`` comment lines naming the ``.local`` arrays promoted to registers
    (docs/allocated-ptx.md, "Hoisted and promoted functions")."""
    return [f"//@promote {name}" for name in arrays]


def mark_prepass(fn: Function, key: str, lines: list[str]) -> None:
    """Mark the allocated function ``fn`` (its first statement the header) as allocated from
    the original transformed by the pre-pass ``key``: ``key=1`` in the header, the pass's
    record in ``lines`` right after it (a later call's lines come first; the checker reads
    each pass's lines by their prefix)."""
    header = fn.body[0]
    fn.body[0] = Raw(COMMENT, header.text + f" {key}=1", header.line)
    fn.body[1:1] = [Raw(COMMENT, line) for line in lines]
