"""The ``ptxalloc`` command: ``parse``, ``analyze``, ``allocate``, ``grade``, ``verify``,
``report`` (HTML) and ``graph`` (DOT).

Errors the user can cause print one line (``file:line:col: what``) and exit with status 2
(1 when ``verify`` refutes an allocation); a traceback on bad input is a bug. Set
``PTXALLOC_DEBUG=1`` to see the traceback of an internal error. Every input and output goes
through :mod:`ptxalloc.files` (``-`` is standard input or output). Each command imports what it
needs when it runs (``json`` too): start-up pays for nothing else (issue 16).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

from . import __version__
from .errors import PtxallocError, UsageError

EXIT_CODES = """exit status: 0 success; 1 refuted: verify found the allocation wrong, or allocate's
own checker refuted its allocation (an internal error, nothing written); 2 bad input or usage
(also an output that cannot be written); 3 internal error; 130 interrupted.
'-' as FILE reads standard input; '-' as an output writes standard output."""

DIFF_HELP = """Compare two builds of a module per function (matched by name): registers used,
MaxLive, spill bytes (stores + loads) and occupancy (percent of the SM's warps at the launch
bound's block size, else 256). A PTX input is allocated with the options given (the same for
both); a JSON input is an 'allocate --json' report used as written. The totals are over the
affected functions (those in both inputs where a figure changed), in Mesa's style:
'Totals from N affected functions: spill bytes 448 -> 447 (-0.22 %)'."""

DIFF_EPILOG = """--fail-on grammar: comma-separated METRIC=SIGN NUMBER[%], no spaces, where
  METRIC is registers, max-live, spill-bytes or occupancy (percentage points);
  SIGN '+' trips when some function's figure rises by more than NUMBER,
  SIGN '-' trips when it falls by more than NUMBER;
  '%' makes NUMBER a percentage of the old figure (from 0, any change that way trips).
  Examples: registers=+0 (any rise), spill-bytes=+10%, occupancy=-1.
  Functions in only one input are listed and never trip.
exit status: 0 no threshold tripped; 1 a threshold tripped (each printed on stderr);
2 bad input or usage; 3 internal error."""


def _load(args: argparse.Namespace):
    """Parse ``args.file`` and print the parser's warnings on stderr; under ``--strict`` they
    are errors (each printed, the last raised: exit 2)."""
    from .ptx import parse_file

    module = parse_file(args.file)
    _warn(module, args.strict)
    return module


def _warn(module, strict: bool) -> None:
    """Print a parsed module's warnings on stderr; under ``strict`` raise them (exit 2)."""
    warnings = module.warnings
    if strict and warnings:
        for w in warnings[:-1]:
            print(f"ptxalloc: {w.as_error()}", file=sys.stderr)
        raise warnings[-1].as_error()
    for w in warnings:
        print(w, file=sys.stderr)


def _cmd_parse(args: argparse.Namespace) -> int:
    from .files import STDIO, check_paths, write_output
    from .ir.cfg import CFG
    from .ptx import emit_module

    check_paths([args.file], {"--emit": args.emit})
    module = _load(args)
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
        write_output(args.emit, emit_module(module))
    # with --emit - the module is standard output and the summary goes to standard error
    info = sys.stderr if args.emit == STDIO else sys.stdout
    if args.json:
        import json
        from .report.schema import header
        from .target.sm import arch_of_target
        print(json.dumps({**header("parse", module.filename, arch_of_target(module.target)),
                          "functions": rows}, indent=2), file=info)
    else:
        print(f"{module.filename}: PTX {module.version or '?'} {' '.join(module.target)}, "
              f"{len(rows)} function(s)", file=info)
        for r in rows:
            regs = ", ".join(f"{n} {k}" for k, n in sorted(r["virtual_registers"].items()))
            print(f"  {r['kind']:5} {r['name']}: {r['blocks']} blocks, {r['instructions']} "
                  f"instructions, {r['loops']} loops (max depth {r['max_loop_depth']}), "
                  f"registers: {regs or 'none'}", file=info)
    return 0


def _select(module, name: str | None):
    """The functions ``--function`` names (all without it): a PTX name, a demangled one or
    a unique substring (:mod:`ptxalloc.names`)."""
    fns = module.functions
    if name is None:
        return fns
    from .names import resolve_function     # (subprocess, for c++filt: only when asked)

    name = resolve_function([f.name for f in fns], name, module.filename)
    return [f for f in fns if f.name == name]


def _budget(text: str | None, allow_auto: bool = False) -> int | str | None:
    """``--registers``: a count from 1 to 255, ``seed`` (CICC's 15) or (allocate) ``auto``;
    None when absent (ptxas's rule)."""
    from .errors import UsageError

    if text is None:
        return None
    if text == "seed" or (text == "auto" and allow_auto):
        return text
    try:
        k = int(text)
    except ValueError:
        raise UsageError(f"--registers must be a number from 1 to 255, seed"
                         f"{' or auto' if allow_auto else ''}, not '{text}'") from None
    if not 1 <= k <= 255:
        raise UsageError(f"--registers must be from 1 to 255, not {k}")
    return k


def _count_or_all(text: str | None, option: str, low: int, high: int | None,
                  allow_all: bool = True) -> int | None:
    """A count option (``all``: None, where allowed); None when absent."""
    from .errors import UsageError

    if text is None or (allow_all and text == "all"):
        return None
    try:
        n = int(text)
    except ValueError:
        n = None
    if n is None or n < low or (high is not None and n > high):
        raise UsageError(f"{option} must be "
                         + (f"a number from {low} to {high}" if high is not None else
                            f"a number from {low} up")
                         + (" or all" if allow_all else "") + f", not '{text}'")
    return n


def _maxrregcount(text: str | None) -> int | None:
    from .errors import UsageError

    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"-maxrregcount must be a number, not '{text}'") from None


def _convention_figures(module, fn, sm, budget: int) -> dict | None:
    """The calling-convention figures of a function at a budget: they depend on the allocation
    (which registers values live across calls get), so the function is allocated to find them.
    None for a leaf kernel, or when the budget is impossible for the function."""
    from .alloc.convention import applies
    from .alloc.driver import allocate_function
    from .errors import AllocationError

    if not applies(fn):
        return None
    try:
        result = allocate_function(fn, sm, budget, module_decls=module.declarations())
    except AllocationError:
        return None
    conv = result.extra.get("convention")
    return dict(conv, budget=budget) if conv else None


def _cmd_analyze(args: argparse.Namespace) -> int:
    from .analysis import analyze_function
    from .analysis.sources import source_files
    from .analysis.static_shared import own_static_shared
    from .target.register_limit import fixed_budgets
    from .report.analysis_report import format_text, function_row
    from .target.sm import profile_for_module

    from .files import STDIO, check_paths

    registers = _budget(args.registers)
    peak_values = _count_or_all(args.peak_values, "--peak-values", 0, None)
    block = _count_or_all(args.block_size, "--block-size", 1, 1024, allow_all=False)
    check_paths([args.file], {"--plot": args.plot})
    if args.plot == STDIO and args.json:
        raise UsageError("analyze: --plot - and --json both write standard output")
    module = _load(args)
    sm = profile_for_module(args.arch, module)
    budgets = fixed_budgets(module, sm, registers, _maxrregcount(args.maxrregcount),
                            args.override_directive_values)
    rows = []
    files = source_files(module)
    decls = module.declarations()
    for fn in _select(module, args.function):
        limit = budgets[fn.name]
        rows.append(function_row(analyze_function(fn, sm), sm, limit.registers,
                                 convention=(_convention_figures(module, fn, sm, limit.registers)
                                             if args.convention else None),
                                 budget_from=limit.source, files=files, lines=args.lines,
                                 block=block, static_shared=own_static_shared(fn, decls)))
    if args.plot:
        _write_plot(args.plot, _select(module, args.function), sm, files, budgets, decls)
    if args.json:
        import json
        from .report.schema import header
        print(json.dumps({**header("analyze", module.filename, sm.name), "functions": rows},
                         indent=2))
    elif args.plot != STDIO:
        print(format_text(rows, sm, module.filename, peak_values))
    return 0


def _write_plot(path: str, fns, sm, files, budgets, decls: list[str]) -> None:
    """``analyze --plot``: the pressure plot of the selected functions (``decls`` the module's
    declarations, for their static shared memory), SVG written here or PNG through matplotlib
    (the ``[plot]`` extra)."""
    from .analysis import analyze_function
    from .analysis.line_pressure import line_pressure
    from .files import write_output
    from .analysis.static_shared import own_static_shared
    from .report.pressure_plot import occupancy_steps, pressure_series, png_plot, svg_document, \
        svg_plot
    from .target.occupancy import block_size

    series = []
    for fn in fns:
        a = analyze_function(fn, sm)
        s = pressure_series(a, line_pressure(a.cfg, a.pressure, files))
        s.budget = budgets[fn.name].registers
        s.steps = occupancy_steps(sm, block_size(fn.directives), 255,
                                  own_static_shared(fn, decls))
        series.append(s)
    if path.lower().endswith(".png"):
        write_output(path, png_plot(series))
    else:
        write_output(path, svg_document([(f"{s.name}: MaxLive {max(s.registers, default=0)}",
                                          svg_plot(s)) for s in series]))


def _knobs(args: argparse.Namespace, budget) -> dict[str, float]:
    """``--knob`` values (``--pressure-limit N`` is the knob ``RegTgtPressureThreshold``),
    with a warning on stderr for each that nothing reads with the chosen allocator and budget,
    and for ``--occupancy-target`` without ``--registers auto`` and ``--coalescing-factor``
    with an allocator that does not coalesce."""
    from .alloc.knobs import PRESSURE_KNOB, inapplicable, parse_knobs

    knobs = parse_knobs(args.knob)
    if args.pressure_limit is not None:
        if PRESSURE_KNOB in knobs:
            raise UsageError(f"--pressure-limit and --knob {PRESSURE_KNOB} set the same value; "
                             f"give one")
        knobs[PRESSURE_KNOB] = _count_or_all(args.pressure_limit, "--pressure-limit", 1, 255,
                                             allow_all=False)
    for w in inapplicable(knobs, args.allocator, budget):
        print(f"ptxalloc: warning: {w}", file=sys.stderr)
    if args.occupancy_target is not None and budget != "auto":
        print("ptxalloc: warning: --occupancy-target has no effect here: only --registers "
              "auto reads it", file=sys.stderr)
    if args.coalescing_factor is not None and args.allocator in ("linear", "optimal"):
        print(f"ptxalloc: warning: --coalescing-factor has no effect here: --allocator "
              f"{args.allocator} does not coalesce", file=sys.stderr)
    return knobs


def _options(args: argparse.Namespace, knobs: dict[str, float], **more):
    """The :class:`~ptxalloc.alloc.driver.Options` of ``allocate`` and ``diff``: the
    allocator, the knobs, seed 001's flags (``--spill-limit``, ``--occupancy-target``,
    ``--coalescing-factor``), where spills go (``--spill-to``, ``--block-size``) and
    ``more``."""
    from .alloc.driver import Options

    extra = {}
    if args.coalescing_factor is not None:
        extra["coalesce_factor"] = _number(args.coalescing_factor, "--coalescing-factor", 0.0,
                                           None)
    if args.block_size is not None and args.spill_to != "shared":
        print("ptxalloc: warning: --block-size has no effect here: only --spill-to shared "
              "reads it", file=sys.stderr)
    return Options(allocator=args.allocator, knobs=knobs, spill_to=args.spill_to,
                   block_size=_count_or_all(args.block_size, "--block-size", 1, 1024,
                                            allow_all=False),
                   spill_limit=_count_or_all(args.spill_limit, "--spill-limit", 0, None,
                                             allow_all=False),
                   occupancy_target=(None if args.occupancy_target is None else _number(
                       args.occupancy_target, "--occupancy-target", 0.0, 100.0)),
                   **extra, **more)


def _number(text: str, option: str, low: float, high: float | None) -> float:
    """A finite number option from ``low`` to ``high`` (None: no upper bound), both
    included."""
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not (x >= low and (high is None or x <= high) and x < float("inf")):
        raise UsageError(f"{option} must be a number from {low:g}"
                         + (f" to {high:g}" if high is not None else " up") + f", not '{text}'")
    return x


def _cmd_allocate(args: argparse.Namespace) -> int:
    """Everything is computed (allocation, proof, report) before the first output is written:
    a failure leaves every output untouched."""
    from .errors import InternalError, VerificationError
    from .files import STDIO, check_paths, own_descriptor, write_outputs
    from .pipeline import allocate_module

    budget = _budget(args.registers, allow_auto=True)
    knobs = _knobs(args, budget)
    output = STDIO if args.output is None else args.output
    check_paths([args.file], {"the PTX (-o)": output, "--json": args.json,
                              "--remarks": args.remarks})
    module = _load(args)
    function = _select(module, args.function)[0].name if args.function else None
    try:
        result = allocate_module(module, budget, args.allocator, args.arch, function,
                                 verify=not args.no_verify,
                                 options=_options(args, knobs,
                                                  time_limit=_time_limit(args.time_limit),
                                                  stats=args.print_regalloc_stats,
                                                  uniform=args.uniform),
                                 maxrregcount=_maxrregcount(args.maxrregcount),
                                 override_directive_values=args.override_directive_values)
    except VerificationError as e:
        raise InternalError(f"the allocation failed its proof; no output written; please "
                            f"report: {e}", exit_code=1) from None
    outputs = [(output, result.ptx)]
    if args.json:
        import json
        outputs.append((args.json, json.dumps(result.report(), indent=2) + "\n"))
    if args.remarks:
        from .analysis.sources import source_files
        from .report.remarks import remarks_yaml
        outputs.append((args.remarks, remarks_yaml(result.functions, source_files(module))))
    write_outputs(outputs)
    for fr in result.functions:
        for warning in fr.warnings:
            print(f"ptxalloc: {module.filename}: function '{fr.name}': warning: {warning}",
                  file=sys.stderr)
    # what is printed goes to standard error when an output is standard output
    on_stdout = any(p == STDIO or own_descriptor(p) == 1 for p, _ in outputs)
    info = sys.stderr if on_stdout else sys.stdout
    if args.format == "cuobjdump":
        from .report.allocation_report import cuobjdump_lines
        print("\n".join(cuobjdump_lines(result.functions)), file=info)
    elif args.verbose:
        from .report.allocation_report import verbose_lines
        from .report.spill_report import spill_lines
        for fr in result.functions:
            for line in verbose_lines(fr, result.sm, module.function(fr.name).kind,
                                      spill_lines(fr.extra["spills"])):
                print(line, file=info)
    if args.print_regalloc_stats:
        from .report.allocation_report import regalloc_stats_lines
        for fr in result.functions:
            for line in regalloc_stats_lines(fr):
                print(line, file=info)
    return 0


def _cmd_grade(args: argparse.Namespace) -> int:
    """``grade FILE``: every allocator's first-round spill cost against the optimum."""
    from .files import STDIO, check_paths, write_output
    from .grade import format_text, grade_module

    budget = _budget(args.registers)
    check_paths([args.file], {"--json": args.json})
    module = _load(args)
    # the name as --function resolves it (a demangled name or a substring names one function)
    function = _select(module, args.function)[0].name if args.function else None
    rows = grade_module(module, budget, args.arch, function, _time_limit(args.time_limit),
                        maxrregcount=_maxrregcount(args.maxrregcount),
                        override_directive_values=args.override_directive_values)
    if args.json:
        import json
        write_output(args.json, json.dumps({"functions": rows}, indent=2) + "\n")
    if args.json != STDIO:
        print(format_text(rows, module.filename))
    return 0


def _time_limit(text: str) -> float:
    from .errors import UsageError

    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise UsageError(f"--time-limit must be a positive number of seconds, not '{text}'")
    return seconds


def _allocation_report(path: str, args: argparse.Namespace, knobs: dict[str, float]) -> dict:
    """``diff``'s view of one input: an ``allocate --json`` report as written, or the report of
    allocating a PTX file with the command's options (proven by the checker)."""
    import json
    from .errors import InternalError, VerificationError
    from .files import read_input
    from .pipeline import allocate_module
    from .ptx.parser import parse

    data, name = read_input(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{name}: not UTF-8 text (byte {e.start})") from None
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"{name}:{e.lineno}:{e.colno}: not a JSON report: {e.msg}") \
                from None
    module = parse(text, name)
    _warn(module, args.strict)
    try:
        return allocate_module(module, _budget(args.registers, allow_auto=True), args.allocator,
                               args.arch, verify=not args.no_verify,
                               options=_options(args, knobs, uniform=args.uniform),
                               maxrregcount=_maxrregcount(args.maxrregcount),
                               override_directive_values=args.override_directive_values
                               ).report()
    except VerificationError as e:
        raise InternalError(f"the allocation of {name} failed its proof; please report: "
                            f"{e}") from None


def _cmd_diff(args: argparse.Namespace) -> int:
    """``diff OLD NEW``: exit 1 when a ``--fail-on`` threshold trips, else 0."""
    import json
    from .report.diff import compare, format_text, parse_thresholds, tripped
    from .report.schema import header

    if args.old == args.new == "-":
        raise UsageError("diff: only one of OLD and NEW can be '-' (standard input)")
    thresholds = parse_thresholds(args.fail_on)
    knobs = _knobs(args, _budget(args.registers, allow_auto=True))
    old = _allocation_report(args.old, args, knobs)
    new = _allocation_report(args.new, args, knobs)
    result = compare(old, new, args.old, args.new)
    trips = tripped(result, thresholds)
    if args.json:
        print(json.dumps({**header("diff", None, None),
                          "old": {"file": args.old, "arch": old.get("arch")},
                          "new": {"file": args.new, "arch": new.get("arch")},
                          **result, "fail_on": [t.text for t in thresholds],
                          "tripped": trips}, indent=2))
    else:
        print(format_text(result, args.old, args.new))
    for t in trips:
        print(f"ptxalloc: diff: {t}", file=sys.stderr)
    return 1 if trips else 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """``verify ORIGINAL.ptx ALLOCATED.ptx``: exit 0 when every allocated function is proven,
    1 when the checker refutes one (the error is printed), 2 on unusable input."""
    from .errors import UsageError
    from .verify import verify_files

    if args.original == args.allocated == "-":
        raise UsageError("verify: only one of ORIGINAL.ptx and ALLOCATED.ptx can be '-' "
                         "(standard input)")
    for proof in verify_files(args.original, args.allocated):
        print(proof.summary())
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    """``report FILE``: the HTML page of :mod:`ptxalloc.report.html_report`; every allocation
    is proven by the checker unless ``--no-verify``."""
    from . import ptxas
    from .alloc.driver import Options
    from .errors import AllocationError, InternalError, VerificationError
    from .files import check_paths, read_input, write_output
    from .pipeline import allocate_module, allocate_what_fits
    from .target.register_limit import fixed_budgets
    from .ptx.parser import parse
    from .report.html_report import html_report
    from .target.sm import profile_for_module

    budget = _budget(args.registers, allow_auto=True)
    output = args.output or "report.html"
    check_paths([args.file], {"-o": output})
    data, name = read_input(args.file)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{name}: not UTF-8 text (byte {e.start})") from None
    module = parse(text, name)
    _warn(module, args.strict)
    sm = profile_for_module(None, module)
    options = Options(allocator=args.allocator)
    one = None
    try:
        if args.function:
            # the module stays whole: a .func's budget depends on the kernels calling it
            one = _select(module, args.function)[0].name
            try:
                result, refused = allocate_module(module, budget, args.allocator, function=one,
                                                  verify=not args.no_verify,
                                                  options=options), {}
            except AllocationError as e:
                result, refused = None, {one: str(e)}
        else:
            result, _, refused = allocate_what_fits(module, budget, args.allocator,
                                                    verify=not args.no_verify, options=options)
    except VerificationError as e:
        raise InternalError(f"the allocation failed its proof; no report written; please "
                            f"report: {e}", exit_code=1) from None
    figures = None
    if not args.no_ptxas and ptxas.available() and args.file != "-":
        figures = ptxas.assemble_file(args.file, ptxas.arch_for(sm.name))
    budgets = fixed_budgets(module, sm, None if budget == "auto" else budget)
    write_output(output, html_report(module, text, sm, result, refused, figures, budgets,
                                     functions=[one] if one else None))
    return 0


def _cmd_graph(args: argparse.Namespace) -> int:
    """``graph FILE --function F``: the interference graph in DOT
    (:mod:`ptxalloc.report.dot_graph`), coloured by the allocation."""
    from .alloc.driver import Options
    from .analysis import analyze_function
    from .errors import AllocationError
    from .files import STDIO, check_paths, write_output
    from .pipeline import allocate_module, pre_passes
    from .report.dot_graph import interference_dot
    from .target.sm import profile_for_module

    budget = _budget(args.registers, allow_auto=True)
    check_paths([args.file], {"-o": args.output})
    module = _load(args)
    fn = _select(module, args.function)[0]
    sm = profile_for_module(None, module)
    options = Options(allocator=args.allocator)
    try:
        result = allocate_module(module, budget, args.allocator, function=fn.name,
                                 verify=not args.no_verify, options=options).functions[0]
    except AllocationError as e:
        print(f"ptxalloc: warning: {e}; the graph is drawn unallocated", file=sys.stderr)
        result = None
    # the graph of the function the allocator colored: after the passes before allocation
    # (recomputation adds registers, the schedule changes which values overlap)
    drawn = pre_passes(fn, options, module.declarations())[0]
    write_output(args.output or STDIO,
                 interference_dot(drawn, analyze_function(drawn, sm).graph, result))
    return 0


def _cmd_batch(args: argparse.Namespace) -> int:
    """``batch FILES_OR_DIRS... --out results.jsonl``: :mod:`ptxalloc.batch`."""
    from .batch import BatchOptions, format_summary, run_batch
    from .errors import UsageError

    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, not {args.jobs}")
    options = BatchOptions(registers=_budget(args.registers), allocator=args.allocator,
                           analyze=args.analyze, verify=not args.no_verify)
    summary = run_batch(args.inputs, args.out, options, jobs=args.jobs, dask=args.dask)
    print(format_summary(summary, args.out))
    return 0


def _add_ptxas_flags(p: argparse.ArgumentParser) -> None:
    """The target and register-limit options, spelled as ptxas spells them."""
    p.add_argument("-arch", "--arch", dest="arch", metavar="sm_XX",
                   help="target model (default: the .target)")
    p.add_argument("-maxrregcount", "--maxrregcount", dest="maxrregcount", metavar="N",
                   help="as ptxas: a register limit for functions without .maxnreg, "
                   ".maxntid or .reqntid")
    p.add_argument("--override-directive-values", action="store_true",
                   help="as ptxas: -maxrregcount overrides the directives")


def _verify_options(p: argparse.ArgumentParser, skip: str) -> None:
    """``--verify-regalloc`` (seed 001's flag; the default) or ``--no-verify``."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--verify-regalloc", dest="no_verify", action="store_false", default=False,
                   help="prove every allocation with the independent checker (the default)")
    g.add_argument("--no-verify", dest="no_verify", action="store_true", help=skip)


def _time_limit_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-limit", metavar="SECONDS", default="10",
                   help="the optimal allocator's time per function (default 10); when it "
                   "runs out, the best allocation found and its proven lower bound")


def _add_allocation_options(p: argparse.ArgumentParser) -> None:
    """How ``allocate`` (and ``diff``, allocating both inputs alike) allocates: the allocator,
    the budget, the knobs, ptxas's flags."""
    p.add_argument("--allocator", "--regalloc", dest="allocator", default="briggs",
                   choices=_AllocatorNames(), metavar="NAME",
                   help="the allocator: %(choices)s (default: %(default)s); --regalloc=NAME is "
                   "another spelling")
    p.add_argument("--spill-limit", metavar="N", help="refuse a function (exit 2, naming it) "
                   "when more than N values would spill (default: no limit)")
    p.add_argument("--occupancy-target", metavar="PCT", help="with --registers auto: the most "
                   "registers whose occupancy (at the launch bound's block size, else 256) "
                   "reaches PCT %%, instead of the budget model's needs-spill test")
    p.add_argument("--pressure-limit", metavar="N", help="with --registers auto: the register "
                   "pressure above which spilling turns aggressive (the budget fraction rises "
                   "toward the whole target); the knob RegTgtPressureThreshold (default 160; "
                   "the model keeps it at or above RegTgtMaxThreads, 119)")
    p.add_argument("--coalescing-factor", metavar="F", help="the factor conservative "
                   "coalescing weighs neighbours' degrees by (default 0.8; 1.0 "
                   "is the textbook test, lower coalesces more); briggs and fatpoint read it")
    p.add_argument("--spill-to", choices=("local", "shared"), default="local",
                   help="where spill slots live: local memory (the default) or, per thread, a "
                   ".shared array of frame x threads-per-block bytes (SMEM "
                   "spilling; refused for a .func and a kernel that calls)")
    p.add_argument("--block-size", metavar="THREADS", help="with --spill-to shared: threads "
                   "per block for a kernel without .reqntid/.maxntid (1..1024)")
    p.add_argument("--registers", metavar="K",
                   help="register budget for every function, 1..255, overriding the "
                   "directives; 'seed': CICC's constant 15; 'auto': per function, the "
                   "occupancy-aware budget ptxas's fat-point allocator computes from MaxLive "
                   "(its RegTgt* knobs) (default: the limit ptxas uses: 255 per thread, "
                   ".maxnreg, launch bounds, -maxrregcount)")
    p.add_argument("--knob", metavar="NAME=VALUE", action="append", default=[],
                   help="an allocator knob by its ptxas name (repeatable); the knobs, their "
                   "defaults and who reads them are listed below")
    p.add_argument("--uniform", action=argparse.BooleanOptionalAction, default=False,
                   help="place warp-uniform integer values in the uniform registers UR0-UR62 "
                   "and UP0-UP6 (sm_75 and later, kernels without calls), written "
                   "%%UR<n>/%%URD<n>/%%UP<n> (default: off, R and P only)")
    _add_ptxas_flags(p)


def _knob_epilog() -> str:
    from .alloc.knobs import help_text
    return ("knobs (--knob NAME=VALUE; [fatpoint]: read by --allocator fatpoint only,\n"
            "[budget]: by --registers auto only; [all]: by every allocator; a knob nothing\n"
            "reads is a warning):\n"
            + help_text() + "\n\n" + EXIT_CODES)


def _strict_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strict", action="store_true",
                   help="treat the parser's warnings (duplicate labels or registers, unknown "
                   "opcodes, wrong operand counts, unknown .version) as errors")


class _AllocatorNames:
    """``--allocator``'s choices, the registered allocators' names: looked up only when an
    ``--allocator`` is checked or its help shown, so that building the parser imports no
    allocator (the option has a ``metavar``: argparse would otherwise list the choices when
    the option is added)."""

    def __contains__(self, name) -> bool:
        from .alloc import api
        # a built-in name needs no allocator imported; any other loads the registry
        return name in api.BUILTIN or name in self._names()

    def __iter__(self):
        return iter(self._names())

    @staticmethod
    def _names() -> list[str]:
        from .alloc import api
        return api.names()


class _Parser(argparse.ArgumentParser):
    """An argument parser whose epilog may be a function, called only when the help is shown
    (``allocate``'s knob table imports the knob registry and ``textwrap``: start-up pays for
    it on every run otherwise, issue 16). Subcommand parsers are of the same class."""

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


class _Unbuilt:
    """Stands for the parser of a subcommand this run does not build: takes its options and
    keeps none (:func:`build_parser` with ``only``)."""

    def add_argument(self, *args, **kwargs) -> None:
        pass

    def add_mutually_exclusive_group(self, *args, **kwargs) -> "_Unbuilt":
        return self

    def set_defaults(self, **kwargs) -> None:
        pass


#: The subcommands, in the order ``--help`` lists them.
COMMANDS = ("parse", "analyze", "allocate", "report", "graph", "grade", "batch", "diff",
            "verify")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``only`` (one of ``COMMANDS``) that subcommand's parser
    alone under the same top-level parser (:func:`main`, when the arguments name the command
    first: the other eight cost a small file's run 1.5 ms to build, issue 16). Everything the
    named command parses, prints or refuses is the same; the top-level help and the refusal of
    an unknown command need the whole parser."""
    ap = _Parser(prog="ptxalloc",
                                 description="A register allocator for NVIDIA PTX.",
                                 epilog=EXIT_CODES)
    ap.add_argument("--version", action="version", version=f"ptxalloc {__version__}")
    # the usage that the top-level parser prints (arguments no command knows) lists every
    # command whichever are built: argparse writes the choices so when no metavar is given
    sub = ap.add_subparsers(dest="command", required=True,
                            metavar=None if only is None else "{%s}" % ",".join(COMMANDS))

    def command(name: str, **kwargs):
        """The subcommand ``name``'s parser, or a stand-in when only another is built."""
        return sub.add_parser(name, **kwargs) if only in (None, name) else _Unbuilt()

    p = command("parse", help="parse a PTX file and summarise its functions",
                       epilog=EXIT_CODES)
    p.add_argument("file")
    p.add_argument("--emit", metavar="OUT.ptx", help="write the re-emitted module ('-': "
                   "standard output, the summary then goes to standard error)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _strict_option(p)
    p.set_defaults(run=_cmd_parse, exit_fast=True)

    p = command("analyze", help="register pressure, interference and occupancy",
                       epilog=EXIT_CODES)
    p.add_argument("file")
    p.add_argument("--function", metavar="NAME", help="only this function: its PTX name, "
                   "its demangled name (c++filt) or a substring naming one function")
    p.add_argument("--registers", metavar="K", help="a budget to report occupancy for, 1..255 "
                   "or 'seed' (CICC's constant 15) (default: ptxas's register limit per "
                   "function)")
    _add_ptxas_flags(p)
    p.add_argument("--lines", action="store_true", help="registers and predicates live at "
                   "every PTX line, the most per source line (.loc/.file), a histogram")
    p.add_argument("--peak-values", metavar="N|all", default="12", help="how many of the "
                   "values live at the peak the text lists (default 12; JSON has all)")
    p.add_argument("--block-size", metavar="THREADS", help="threads per block for occupancy "
                   "and what to change (default: .reqntid/.maxntid, else 256)")
    p.add_argument("--convention", action="store_true",
                   help="also report each .func's calling-convention figures (callee-saved "
                   "registers used, bytes saved and restored): they depend on the allocation, "
                   "so this allocates every function that makes or is reached by calls")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--plot", metavar="PRESSURE.svg|png", help="also draw the registers and "
                   "predicates live per PTX line, one plot per function: SVG (written by "
                   "ptxalloc), or PNG when the name ends in .png (needs matplotlib: pip install "
                   "'ptxalloc[plot]'); '-' writes the SVG on standard output instead of the "
                   "text report")
    _strict_option(p)
    p.set_defaults(run=_cmd_analyze, exit_fast=True)

    p = command("allocate", help="allocate registers and write physical PTX",
                       epilog=_knob_epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file")
    p.add_argument("-o", "--output", metavar="OUT.ptx",
                   help="write the PTX here, '-' for standard output (the default)")
    _add_allocation_options(p)
    p.add_argument("--function", metavar="NAME", help="allocate only this function: its PTX "
                   "name, its demangled name (c++filt) or a substring naming one function")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="per function, ptxas-style figures, moves, rounds and time")
    p.add_argument("--format", choices=("ptxas", "cuobjdump"), default="ptxas",
                   help="what -v prints: ptxas's '-v' lines (default) or, implying -v, "
                   "'cuobjdump -res-usage' lines (REG:.. STACK:.. SHARED:? LOCAL:..; shared "
                   "memory, constant banks, textures are not known to ptxalloc)")
    p.add_argument("--remarks", metavar="FILE.yaml", help="write the spills as LLVM "
                   "optimization records (--- !Missed, Pass: regalloc), as opt-viewer reads")
    p.add_argument("--json", metavar="REPORT.json", help="write the report as JSON ('-': "
                   "standard output, when -o names a file)")
    _verify_options(p, "skip the independent checker")
    p.add_argument("--print-regalloc-stats", action="store_true",
                   help="print the allocation statistics per function: interference nodes, edges, "
                   "density, degrees, moves coalesced, spill rate, rounds, time per phase "
                   "(also 'regalloc_stats' in --json)")
    _time_limit_option(p)
    _strict_option(p)
    p.set_defaults(run=_cmd_allocate, exit_fast=True)

    p = command("report", help="one self-contained HTML page: pressure plots, the PTX "
                       "beside its source lines, the peak, the spills, occupancy, ptxas's "
                       "figures", epilog=EXIT_CODES)
    p.add_argument("file")
    p.add_argument("-o", "--output", metavar="REPORT.html",
                   help="write the page here (default report.html; '-': standard output)")
    p.add_argument("--allocator", default="briggs", choices=_AllocatorNames(), metavar="NAME",
                   help="the allocator: %(choices)s (default: %(default)s)")
    p.add_argument("--registers", metavar="K", help="register budget for every function, "
                   "1..255, 'seed' or 'auto' (default: the limit ptxas uses); a function the "
                   "budget cannot allocate is shown unallocated with the reason")
    p.add_argument("--function", metavar="NAME", help="only this function")
    p.add_argument("--no-ptxas", action="store_true",
                   help="do not run ptxas -v for its figures (run when on the PATH)")
    p.add_argument("--no-verify", action="store_true", help="skip the independent checker")
    _strict_option(p)
    p.set_defaults(run=_cmd_report)

    p = command("graph", help="one function's interference graph in Graphviz DOT, "
                       "coloured by the allocation", epilog=EXIT_CODES)
    p.add_argument("file")
    p.add_argument("--function", metavar="NAME", required=True, help="the function: its PTX "
                   "name, its demangled name or a substring naming one function")
    p.add_argument("-o", "--output", metavar="GRAPH.dot",
                   help="write the DOT here (default: standard output)")
    p.add_argument("--allocator", default="briggs", choices=_AllocatorNames(), metavar="NAME",
                   help="the allocator: %(choices)s (default: %(default)s)")
    p.add_argument("--registers", metavar="K", help="register budget, 1..255, 'seed' or "
                   "'auto' (default: the limit ptxas uses)")
    p.add_argument("--no-verify", action="store_true", help="skip the independent checker")
    _strict_option(p)
    p.set_defaults(run=_cmd_graph)

    p = command("grade", help="every allocator's spill cost and registers against the "
                       "optimum (--allocator optimal), per function", epilog=EXIT_CODES)
    p.add_argument("file")
    p.add_argument("--registers", metavar="K", help="register budget for every function, "
                   "1..255 or 'seed' (default: the limit ptxas uses)")
    _add_ptxas_flags(p)
    p.add_argument("--function", metavar="NAME", help="only this function")
    p.add_argument("--json", metavar="REPORT.json", help="write the grade as JSON ('-': "
                   "standard output, instead of the table)")
    _time_limit_option(p)
    _strict_option(p)
    p.set_defaults(run=_cmd_grade)

    p = command("batch", help="allocate (or analyse) many files in one process pool, "
                       "one JSON line per function, resumable", epilog=EXIT_CODES)
    p.add_argument("inputs", nargs="+", metavar="FILE_OR_DIR",
                   help="PTX files, and directories searched for *.ptx")
    p.add_argument("--out", required=True, metavar="RESULTS.jsonl",
                   help="append the results here; files already complete in it are skipped")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="worker processes (default: one per CPU)")
    p.add_argument("--dask", metavar="ADDRESS", help="run the files on the workers of this "
                   "dask.distributed scheduler (e.g. tcp://host:8786) instead of --jobs local "
                   "processes; needs the [dask] extra")
    p.add_argument("--registers", metavar="K", help="a budget for every function, 1..255 or "
                   "'seed' (default: ptxas's register limit per function)")
    p.add_argument("--allocator", default="briggs", choices=_AllocatorNames(), metavar="NAME",
                   help="the allocator: %(choices)s (default: %(default)s)")
    p.add_argument("--analyze", action="store_true",
                   help="analyse instead of allocating (analyze's figures per function)")
    p.add_argument("--no-verify", action="store_true", help="skip the independent checker")
    p.set_defaults(run=_cmd_batch)

    p = command("diff", help="compare two builds per function: registers, MaxLive, "
                       "spill bytes, occupancy (exit 1 when a --fail-on threshold trips)",
                       description=DIFF_HELP, epilog=DIFF_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", metavar="OLD", help="a PTX file or an 'allocate --json' report")
    p.add_argument("new", metavar="NEW", help="a PTX file or an 'allocate --json' report")
    p.add_argument("--fail-on", metavar="THRESHOLDS",
                   help="e.g. registers=+2,spill-bytes=+0,occupancy=-1 (grammar below)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    _add_allocation_options(p)
    _verify_options(p, "skip the independent checker on the allocations")
    _strict_option(p)
    p.set_defaults(run=_cmd_diff)

    p = command("verify", help="prove an allocated PTX file against its original "
                       "(exit 0 proven, 1 refuted, 2 unusable input)", epilog=EXIT_CODES)
    p.add_argument("original", metavar="ORIGINAL.ptx")
    p.add_argument("allocated", metavar="ALLOCATED.ptx")
    p.set_defaults(run=_cmd_verify, exit_fast=True)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run one command; ``argv`` None: this process's own arguments, as the ``ptxalloc``
    program (then parse, analyze, allocate and verify run without the cyclic garbage collector
    and end the process themselves once their output is flushed:
    :func:`_exit_without_teardown`)."""
    process = argv is None
    if argv is None:
        argv = sys.argv[1:]
    ap = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = ap.parse_args(argv)
    exit_fast = process and getattr(args, "exit_fast", False)
    if exit_fast:
        # without the cyclic collector, too: its passes over the objects of the modules the
        # command imports cost a small file 1 ms, and the phases that build most objects pause
        # it anyway (util.gc_paused); renderer.ptx's allocate peaks at the same memory without
        # it (docs/decisions.md, "Start-up of a small file, round 9")
        gc.disable()
    code = _run(args)
    if exit_fast:
        _exit_without_teardown(code)
    return code


def _exit_without_teardown(code: int) -> None:
    """End the process now, its output flushed, without freeing what the command built
    (issue 16: on renderer.ptx ``analyze`` spent 30 ms, 3 % of its run, freeing the parsed
    module and its analyses object by object; a small file's ``allocate`` 2 ms of 56 in the
    interpreter's own teardown). Only for the commands that set ``exit_fast`` (parse, analyze,
    allocate, verify): they write files through :mod:`ptxalloc.files` (closed before it
    returns) and standard output, and start no process or thread that outlives them. Returns
    when flushing fails otherwise than by a reader gone away (a full disk), leaving the error
    to the interpreter's usual exit."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass                        # ``| head``: nothing more to write, as in :func:`_run`
    except (OSError, ValueError):
        return
    os._exit(code)


def _run(args: argparse.Namespace) -> int:
    """``args.run(args)``, an error reported on one line with its exit status."""
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
