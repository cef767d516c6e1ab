"""Parse time of the same statements on one line and on separate lines (issue 11: parsing is
linear in the input whatever its layout). The body is a corpus kernel's (the largest function
of renderer.ptx, repeated to the size asked for) or, without the corpus, a synthetic one.

    python3 bench/parse_scaling.py [STATEMENTS]      (default 200000)
"""

from __future__ import annotations

import re
import sys

from common import best_of, corpus_root

from ptxalloc.ir.instruction import REG_DECL, Raw
from ptxalloc.ptx import parse

KERNEL = "gpuocelot/tests/ptx/unstructured/renderer.ptx"


def body_statements() -> tuple[list[str], list[str], str]:
    """(declarations, other statements, where they come from): one function body split at
    its ';' (comments, labels and nested scopes dropped, so the statements repeat cleanly)."""
    root = corpus_root()
    if root is not None:
        from ptxalloc.ptx import parse_file
        module = parse_file(str(root / KERNEL))
        fn = max(module.functions, key=lambda f: len(f.body))
        name = fn.regs.names.__getitem__
        decls = [s.text for s in fn.body if type(s) is Raw and s.kind == REG_DECL]
        stmts = [i.render(name) for i in fn.instructions()
                 if not i.opcode.startswith(("bra", "ret", "exit", "call"))]
        return decls, stmts, f"{KERNEL} ({fn.name})"
    decls = [".reg .b32 %r<8>;", ".reg .f32 %f<8>;"]
    stmts = [f"add.s32 %r{k % 7 + 1}, %r{(k + 3) % 7 + 1}, {k};" for k in range(7)]
    stmts += ["mul.f32 %f1, %f2, %f3;", "fma.rn.f32 %f4, %f1, %f2, %f3;"]
    return decls, stmts, "synthetic"


def module(decls: list[str], stmts: list[str], count: int, sep: str) -> str:
    body = [stmts[k % len(stmts)] for k in range(count)]
    return (".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"
            + sep.join(decls + body + ["ret;"]) + "\n}\n")


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    decls, stmts, origin = body_statements()
    decls = [re.sub(r"\s+", " ", d) for d in decls]
    one_line = module(decls, stmts, count, " ")
    lines = module(decls, stmts, count, "\n\t")
    a = parse(one_line, "one_line.ptx")
    b = parse(lines, "lines.ptx")
    assert len(a.functions[0].instructions()) == len(b.functions[0].instructions()) == count + 1
    t_one = best_of(lambda: parse(one_line, "one_line.ptx"))
    t_lines = best_of(lambda: parse(lines, "lines.ptx"))
    print(f"body: {origin}; {count} statements, {len(one_line)} characters")
    print(f"one line:        {t_one:8.3f} s")
    print(f"separate lines:  {t_lines:8.3f} s")
    print(f"ratio:           {t_one / t_lines:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
