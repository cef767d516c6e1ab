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


def _select(module, name: str | None):
    from .errors import UsageError

    fns = module.functions
    if name is None:
        return fns
    chosen = [f for f in fns if f.name == name]
    if not chosen:
        known = ", ".join(f.name for f in fns[:20])
        raise UsageError(f"{module.filename}: no function named '{name}' (functions: {known})")
    return chosen


def _budget(text: str | None, allow_auto: bool = False) -> int | str | None:
    from .errors import UsageError

    if text is None:
        return None
    if text == "auto" and allow_auto:
        return "auto"
    try:
        k = int(text)
    except ValueError:
        raise UsageError(f"--registers must be a number from 1 to 255"
                         f"{' or auto' if allow_auto else ''}, not '{text}'") from None
    if not 1 <= k <= 255:
        raise UsageError(f"--registers must be from 1 to 255, not {k}")
    return k


def _convention_figures(module, fn, sm, budget: int) -> dict | None:
    """The calling-convention figures of a function at a budget: they depend on the allocation
    (which registers values live across calls get), so the function is allocated to find them.
    None for a leaf kernel, or when the budget is impossible for the function."""
    from .alloc.convention import applies
    from .alloc.driver import allocate_function
    from .errors import AllocationError
    from .ir.instruction import Raw

    if not applies(fn):
        return None
    try:
        result = allocate_function(fn, sm, budget, module_decls=[
            it.text for it in module.items if type(it) is Raw])
    except AllocationError:
        return None
    conv = result.extra.get("convention")
    return dict(conv, budget=budget) if conv else None


def _cmd_analyze(args: argparse.Namespace) -> int:
    from .analysis import analyze_function
    from .ptx import parse_file
    from .report.analysis_report import format_text, function_row
    from .target.sm import profile_for

    budget = _budget(args.registers)
    module = parse_file(args.file)
    sm = profile_for(args.arch, module.sm)
    rows = [function_row(analyze_function(fn, sm), sm, budget,
                         convention=_convention_figures(module, fn, sm, budget or 15))
            for fn in _select(module, args.function)]
    if args.json:
        print(json.dumps({"functions": rows}, indent=2))
    else:
        print(format_text(rows, sm, args.file))
    return 0


def _cmd_allocate(args: argparse.Namespace) -> int:
    from .alloc.driver import Options
    from .alloc.knobs import parse_knobs
    from .pipeline import allocate_module
    from .ptx import parse_file
    from .report.allocation_report import verbose_lines
    from .util import write_atomic

    budget = _budget(args.registers, allow_auto=True)
    knobs = parse_knobs(args.knob)
    module = parse_file(args.file)
    _select(module, args.function)
    result = allocate_module(module, budget if budget is not None else 15, args.allocator,
                             args.arch, args.function, verify=not args.no_verify,
                             options=Options(allocator=args.allocator, knobs=knobs))
    to_file = args.output not in (None, "-")
    info = sys.stdout if to_file else sys.stderr
    if args.verbose:
        for fr in result.functions:
            for line in verbose_lines(fr, result.sm):
                print(line, file=info)
    if args.json:
        write_atomic(args.json, json.dumps(result.report(), indent=2) + "\n")
    if to_file:
        write_atomic(args.output, result.ptx)
    else:
        sys.stdout.write(result.ptx)
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """``verify ORIGINAL.ptx ALLOCATED.ptx``: exit 0 when every allocated function is proven,
    1 when the checker refutes one (the error is printed), 2 on unusable input."""
    from .verify import verify_files

    for proof in verify_files(args.original, args.allocated):
        print(proof.summary())
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

    p = sub.add_parser("analyze", help="register pressure, interference and occupancy")
    p.add_argument("file")
    p.add_argument("--function", metavar="NAME", help="only this function")
    p.add_argument("--registers", metavar="K", help="a budget to report occupancy for")
    p.add_argument("--arch", metavar="sm_XX", help="target model (default: the .target)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=_cmd_analyze)

    p = sub.add_parser("allocate", help="allocate registers and write physical PTX")
    p.add_argument("file")
    p.add_argument("-o", "--output", metavar="OUT.ptx",
                   help="write the PTX here, '-' for standard output (the default)")
    from .alloc import api
    p.add_argument("--allocator", default="briggs", choices=api.names())
    p.add_argument("--registers", metavar="K", default="15",
                   help="register budget, 1..255, or 'auto': seed 004's occupancy-aware "
                   "model picks one per function (default 15)")
    p.add_argument("--knob", metavar="NAME=VALUE", action="append", default=[],
                   help="a fat-point allocator knob by its ptxas name, e.g. "
                   "RegAllocThresholdForDiscardConflicts=50 (repeatable)")
    p.add_argument("--arch", metavar="sm_XX", help="target model (default: the .target)")
    p.add_argument("--function", metavar="NAME", help="allocate only this function")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="per function, ptxas-style figures, moves, rounds and time")
    p.add_argument("--json", metavar="REPORT.json", help="write the report as JSON")
    p.add_argument("--no-verify", action="store_true",
                   help="skip the independent checker")
    p.set_defaults(run=_cmd_allocate)

    p = sub.add_parser("verify", help="prove an allocated PTX file against its original "
                       "(exit 0 proven, 1 refuted, 2 unusable input)")
    p.add_argument("original", metavar="ORIGINAL.ptx")
    p.add_argument("allocated", metavar="ALLOCATED.ptx")
    p.set_defaults(run=_cmd_verify)
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
    except BrokenPipeError:
        # the reader went away (``ptxalloc allocate f.ptx | head``): not an error
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
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
