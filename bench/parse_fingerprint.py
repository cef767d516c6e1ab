"""Record, then compare, a fingerprint of what the parser builds from every PTX file: proof that
a change to the front end (issue 16's speed work) left every statement as it was.

    PYTHONPATH=src python3 bench/parse_fingerprint.py record /tmp/parse-ref.json
    PYTHONPATH=src python3 bench/parse_fingerprint.py compare /tmp/parse-ref.json

One SHA-256 per file -- every corpus file, ``tests/**/*.ptx`` and ``examples/*.ptx`` -- over the
emitted text, the warnings, the module header, each function's registers (names, types,
classes, arity, declaration lines), parameters, directives, branch tables and header, and each
statement: for an instruction its opcode, base, guard, operands (their ``repr`` and types),
rendering, roles, defs, uses, line, location, comment, copy flag, ``known`` and implicit uses;
for a label its name and line; for a raw statement its kind, text and line. A file the parser
refuses records its error message instead. ``compare`` parses again and lists every file whose
fingerprint differs (exit 1 when any does). The snapshot itself is not part of the repo.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, corpus_root  # noqa: E402


def inputs() -> list[Path]:
    files: list[Path] = []
    root = corpus_root()
    if root is not None:
        files += sorted(root.rglob("*.ptx"))
    files += sorted((REPO / "tests").rglob("*.ptx"))
    files += sorted((REPO / "examples").glob("*.ptx"))
    return files


def fingerprint(text: str, name: str) -> str:
    """The fingerprint of what :func:`ptxalloc.ptx.parse` builds from ``text`` (module
    docstring), or ``ERR <message>`` when it refuses the text."""
    from ptxalloc.errors import PtxSyntaxError
    from ptxalloc.ir.instruction import Instruction, Label
    from ptxalloc.ir.module import Function
    from ptxalloc.ptx import parse
    from ptxalloc.ptx.emitter import emit_module

    try:
        module = parse(text, name)
    except PtxSyntaxError as e:
        return f"ERR {e}"
    h = hashlib.sha256()
    h.update(emit_module(module).encode())
    for w in module.warnings:
        h.update(str(w).encode())
    h.update(repr((module.version, module.target, module.address_size)).encode())
    for item in module.items:
        if type(item) is not Function:
            h.update(repr((type(item).__name__, getattr(item, "kind", None),
                           getattr(item, "text", None), getattr(item, "line", None))).encode())
            continue
        r = item.regs
        h.update(repr((r.names, r.types, [int(c) for c in r.classes], r.vec, r.lines,
                       item.params, item.returns, item.directives, item.branch_targets,
                       item.linkage, item.line, item.name, item.kind, item.header)).encode())
        for s in item.body:
            if type(s) is Instruction:
                h.update(repr((s.opcode, s.base, s.guard, s.guard_neg,
                               [repr(o) for o in s.ops], [type(o).__name__ for o in s.ops],
                               s.render(lambda v: f"v{v}"), s.roles, s.defs, s.uses, s.line,
                               s.loc, s.comment, s.is_copy, s.known, s.implicit_uses,
                               s.origin)).encode())
            elif type(s) is Label:
                h.update(repr(("L", s.name, s.line)).encode())
            else:
                h.update(repr(("R", s.kind, s.text, s.line)).encode())
    return h.hexdigest()


def fingerprints(files: list[Path]) -> dict[str, str]:
    out = {}
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        try:
            key = str(f.relative_to(REPO))
        except ValueError:
            key = "corpus/" + str(f.relative_to(corpus_root()))
        out[key] = fingerprint(text, key)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["record", "compare"])
    ap.add_argument("snapshot", type=Path)
    args = ap.parse_args()
    now = fingerprints(inputs())
    refused = sum(v.startswith("ERR ") for v in now.values())
    if args.mode == "record":
        args.snapshot.write_text(json.dumps(now, indent=0, sort_keys=True) + "\n")
        print(f"{len(now)} files fingerprinted ({refused} refused by the parser)")
        return 0
    before = json.loads(args.snapshot.read_text())
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for k in differ:
        print(f"DIFFERS: {k}")
    print(f"{len(now)} files, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
