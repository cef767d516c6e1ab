"""How fast could the front end read renderer.ptx? The parser beside two floors (issue 16).

    python3 bench/parse_floor.py                  # renderer.ptx and matrix_free
    python3 bench/parse_floor.py FILE... --repeat 5

Per file, the best CPU time of ``--repeat`` runs (``time.process_time``, the garbage collector
paused as the parser pauses it) of:

* ``parser``: :func:`ptxalloc.ptx.parse` as it is;
* ``object floor``: the least any front end building today's IR could do on the same text --
  for each body line the parser's own line pattern (``_SIMPLE_LINE``), one ``Instruction`` per
  instruction with its operands looked up by name, its roles from the ISA table
  (``isa.set_plain_roles``), one ``Reg`` and one ``RegTable`` entry per register referenced,
  one ``Raw`` per declaration and a ``Label`` per label. Nothing is checked: no warnings, no
  errors, no scopes, no addresses other than ``[reg+off]`` parsed -- it skips what it does not
  know -- so it is a lower bound, not a parser;
* ``flat floor``: a front end that builds no object per statement: one ``finditer`` over
  each body with one compiled pattern (instructions, declarations, labels), opcodes interned to
  small ints, registers to ids on first reference, and per function flat ``array('i')`` columns
  (opcode id, line, and defs and uses as offsets into one id array), the defs and uses by the
  same role rule (``isa.plain_first_role`` per opcode, cached per opcode id). Just as
  unchecked: a lower bound of what the "flat front end" of docs/decisions.md could cost.

Neither floor is a parser (they recognize the plain instructions only and check nothing): the
figures say how much of the parse is the object model and how much a rewrite could save.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
from array import array
from pathlib import Path
from time import process_time

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import corpus_root  # noqa: E402

FILES = ["gpuocelot/tests/ptx/unstructured/renderer.ptx",
         "ptx90parser/tests/sample/matrix_free_device_matrix_vector_01.1.sm_80.ptx"]

# a function header (a new function: its own register names)
_HEADER = re.compile(r"[ \t]*+(?:\.\w++[ \t]++)*?\.(?:entry|func)\b")
# one statement per line of the three commonest kinds, or a function header: a scalar
# declaration (1: type, 2: name), an instruction (3: guard, 4: opcode, 5: operands), a label
# (6), a header (7)
_STATEMENT = re.compile(r"""^[ \t]*+(?:
    (?P<header>(?:\.\w++[ \t]++)*?\.(?:entry|func)\b)
  | \.reg[ \t]++(\.\w++)[ \t]++([A-Za-z_$%][\w$%]*+)[ \t]*+;
  | (?:@!?([A-Za-z_$%][\w$%]*+)[ \t]++)?([A-Za-z_][\w.]*+)(?:[ \t]++([^;{}()\n]*+))?;
  | ([A-Za-z_$%][\w$%]*+)[ \t]*+:
)""", re.M | re.X)


def object_floor(text: str) -> int:
    """Today's IR built from the plain lines of ``text`` with no checking; returns the
    instruction count."""
    from ptxalloc.ir import isa
    from ptxalloc.ir.instruction import REG_DECL, Instruction, Label, Raw
    from ptxalloc.ir.operands import Mem, Reg, Sym
    from ptxalloc.ir.registers import RegTable, class_of_type
    from ptxalloc.ptx.parser import _SIMPLE_LINE

    count = 0
    first_role: dict[str, int] = {}
    functions = []
    names: dict[str, list] = {}
    regs = RegTable()
    cache: list[Reg] = []
    stmts: list = []
    pos, end = 0, len(text)
    line = 0
    while pos < end:
        line += 1
        m = _SIMPLE_LINE.match(text, pos)
        if m is None:
            if _HEADER.match(text, pos):
                names, regs, cache, stmts = {}, RegTable(), [], []
                functions.append((regs, stmts))
            pos = text.find("\n", pos) + 1 or end
            continue
        decl, ptype, name, neg, gname, opcode, rest, label, loc = m.groups()
        pos = m.end()
        if opcode is not None:
            ops = []
            reads = []
            for t in rest.split(",") if rest else ():
                t = t.strip()
                address = t[:1] == "["
                if address:
                    t = t[1:-1].split("+", 1)[0].strip()
                e = names.get(t)
                if e is None:
                    ops.append(Sym(t))
                    continue
                vid = e[4]
                if vid < 0:
                    vid = e[4] = regs.add(t, e[0], e[1], e[2], e[3])
                    cache.append(Reg(vid))
                ops.append(Mem(cache[vid], "", [], "") if address else cache[vid])
                reads.append(vid)
            guard = -1
            if gname is not None and gname in names:
                e = names[gname]
                if e[4] < 0:
                    e[4] = regs.add(gname, e[0], e[1], e[2], e[3])
                    cache.append(Reg(e[4]))
                guard = e[4]
            ins = Instruction(opcode, ops, guard, bool(neg), line, None)
            role = first_role.get(opcode)
            if role is None:
                role = first_role[opcode] = isa.plain_first_role(opcode)
            if role and reads and type(ops[0]) is Reg:
                isa.set_plain_roles(ins, reads, role, regs)
            stmts.append(ins)
            count += 1
        elif decl is not None:
            names[name] = [ptype, class_of_type(ptype), 0, line, -1]
            stmts.append(Raw(REG_DECL, decl, line))
        elif label is not None:
            stmts.append(Label(label, line))
    return count


def flat_floor(text: str) -> int:
    """Flat columns from the plain lines of ``text`` with no checking; returns the
    instruction count."""
    from ptxalloc.ir import isa
    from ptxalloc.ir.instruction import DEF

    count = 0
    opcode_ids: dict[str, int] = {}
    first_def: list[bool] = []          # per opcode id: its first register operand is defined
    functions = []
    ids: dict[str, int] = {}            # declared name -> id (-1 until referenced)
    nregs = 0
    for m in _STATEMENT.finditer(text):
        header, ptype, name, guard, opcode, rest, label = m.groups()
        if opcode is not None:
            k = opcode_ids.get(opcode)
            if k is None:
                k = opcode_ids[opcode] = len(first_def)
                first_def.append(isa.plain_first_role(opcode) == DEF)
            opcodes.append(k)
            positions.append(m.start())     # the line, found from it on demand
            def_at.append(len(regs))
            uses = []
            for j, t in enumerate(rest.split(",") if rest else ()):
                t = t.strip()
                if t[:1] == "[":
                    t = t[1:-1].split("+", 1)[0].strip()
                v = ids.get(t)
                if v is None:
                    continue
                if v < 0:
                    v = ids[t] = nregs
                    nregs += 1
                if j == 0 and first_def[k]:
                    regs.append(v)
                else:
                    uses.append(v)
            if guard is not None:
                v = ids.get(guard, -1)
                if v >= 0:
                    uses.append(v)
            use_at.append(len(regs))
            regs.extend(uses)
            count += 1
        elif name is not None:
            ids[name] = -1
        elif label is not None:
            labels[label] = len(opcodes)
        else:
            # a new function: its registers, and its columns (opcode id, text position, and
            # where its defs and its uses start in ``regs``)
            ids, nregs, labels = {}, 0, {}
            opcodes, positions, def_at, use_at, regs = (array("i") for _ in range(5))
            functions.append((opcodes, positions, def_at, use_at, regs, labels))
    return count


def best(fn, text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.disable()
        try:
            start = process_time()
            fn(text)
            times.append(process_time() - start)
        finally:
            gc.enable()
        gc.collect()
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="PTX files (default: renderer.ptx, matrix_free)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    from ptxalloc.ptx import parse

    paths = args.files
    if not paths:
        root = corpus_root()
        if root is None:
            print("no corpus: name the files")
            return 2
        paths = [str(root / f) for f in FILES]
    print(f"{'file':<50} {'lines':>7} {'instrs':>7} {'parser s':>9} {'object floor':>13} "
          f"{'flat floor':>11}")
    for path in paths:
        text = Path(path).read_text()
        instrs = sum(len(f.body) and sum(1 for s in f.body if type(s).__name__ == "Instruction")
                     for f in parse(text, path).functions)
        got = [best(lambda t: parse(t, path), text, args.repeat),
               best(object_floor, text, args.repeat), best(flat_floor, text, args.repeat)]
        print(f"{Path(path).name[:50]:<50} {text.count(chr(10)):>7} {instrs:>7} "
              f"{got[0]:>9.3f} {got[1]:>13.3f} {got[2]:>11.3f}")
        print(f"{'':<50} {'':>7} {'us/line':>7} " + " ".join(
            f"{1e6 * g / max(1, text.count(chr(10))):>{w}.2f}"
            for g, w in zip(got, (9, 13, 11))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
