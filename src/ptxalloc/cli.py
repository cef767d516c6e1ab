"""The ``ptxalloc`` command: ``parse``, ``analyze``, ``allocate`` and ``verify``.

Errors the user can cause print one line (``file:line:col: what``) and exit with status 2
(1 when ``verify`` refutes an allocation); a traceback on bad input is a bug. Set
``PTXALLOC_DEBUG=1`` to see the traceback of an internal error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .errors import PtxallocError


def _cmd_parse(args: argparse.Namespace) -> int:
    from .ir.cfg import CFG
    from .ptx import emit_module, parse_file
    from .util import write_atomic

    module = parse_file(args.file)
    rows = []
    for fn in module.functions:
        cfg = CFG(fn)
        rows.append({
            "name": fn.name,
            "kind": fn.kind,
            "blocks": len(cfg.blocks),
            "instructions": len(cfg.instrs),
            "virtual_registers": fn.regs.count_by_class(),
            "loops": len(cfg.loops),
            "max_loop_depth": max((lp.depth for lp in cfg.loops), default=0),
        })
    if args.emit:
        write_atomic(args.emit, emit_module(module))
    if args.json:
        print(json.dumps({"functions": rows}, indent=2))
    else:
        print(f"{args.file}: PTX {module.version or '?'} {' '.join(module.target)}, "
              f"{len(rows)} function(s)")
        for r in rows:
            regs = ", ".join(f"{n} {k}" for k, n in sorted(r["virtual_registers"].items()))
            print(f"  {r['kind']:5} {r['name']}: {r['blocks']} blocks, {r['instructions']} "
                  f"instructions, {r['loops']} loops (max depth {r['max_loop_depth']}), "
                  f"registers: {regs or 'none'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ptxalloc",
                                 description="A register allocator for NVIDIA PTX.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("parse", help="parse a PTX file and summarise its functions")
    p.add_argument("file")
    p.add_argument("--emit", metavar="OUT.ptx", help="write the re-emitted module")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(run=_cmd_parse)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return args.run(args)
    except PtxallocError as e:
        print(f"ptxalloc: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("ptxalloc: interrupted", file=sys.stderr)
        return 130
    except RecursionError:
        if os.environ.get("PTXALLOC_DEBUG"):
            raise
        print("ptxalloc: internal error: input too deeply nested", file=sys.stderr)
        return 3
    except Exception as e:  # an internal bug: one line, not a traceback
        if os.environ.get("PTXALLOC_DEBUG"):
            raise
        print(f"ptxalloc: internal error: {type(e).__name__}: {e} "
              "(set PTXALLOC_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
