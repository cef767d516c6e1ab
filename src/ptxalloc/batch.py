"""``ptxalloc batch``: allocate (or analyse) many PTX files in one process pool (issue 16).

Start-up is paid once: the files are shared out to ``--jobs`` worker processes (forked from
this one, the package already imported). Every result is a JSON line of ``--out``:

* one line per function: ``{"file", "function", ...}`` with the allocate report of the
  function (``allocate --json``'s row) or, under ``--analyze``, the analyze row (no allocation);
* then one line closing the file: ``{"file", "complete": true, "functions", "seconds",
  "warnings"}``, with ``"error"`` (the one-line message) when the file could not be processed.

A file's lines are written together in one write, with SIGINT held off for its duration, and
flushed: Ctrl-C leaves complete lines only. ``--out`` is appended to; on a later run, files
already closed by a ``complete`` line are skipped (resume: give each kind of run, allocate or
``--analyze``, budget, allocator, its own ``--out``), and lines of files left unclosed
(none, unless the process was killed mid-write) are dropped first. At the end a summary table
is printed on standard output; the progress line goes to standard error when it is a terminal.

With ``--dask ADDRESS`` the files go to the workers of a running dask.distributed scheduler
instead of a local pool (the optional extra ``[dask]``; the workers need ptxalloc importable and
the files readable at the same paths). The lines, resume and Ctrl-C are the same: results are
written here, in this process, as each file comes back; on Ctrl-C the files not yet back are
cancelled on the cluster.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field

from .errors import PtxallocError, UsageError


@dataclass(frozen=True)
class BatchOptions:
    registers: int | str | None = None
    allocator: str = "briggs"
    analyze: bool = False
    verify: bool = True


@dataclass
class Summary:
    files: int = 0
    skipped: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    functions: int = 0
    seconds: float = 0.0
    slowest: list[tuple[float, str]] = field(default_factory=list)


def expand_inputs(paths: list[str]) -> list[str]:
    """Files as given and every ``*.ptx`` under each directory (sorted), without repeats."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs.sort()
                found += [os.path.join(root, f) for f in files if f.endswith(".ptx")]
            out += sorted(found)
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise UsageError(f"{p}: no such file or directory")
    seen: set[str] = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def completed_files(out_path: str) -> set[str]:
    """The files already closed by a ``complete`` line of ``out_path``; a trailing partial
    line and the lines of files never closed are removed from it (written whole again)."""
    if not os.path.exists(out_path):
        return set()
    try:
        with open(out_path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UsageError(f"{out_path}: cannot write: {e.strerror}") from None
    records = []
    for raw in data.split(b"\n"):
        try:
            records.append((raw, json.loads(raw)))
        except ValueError:
            continue                                # an empty or partial line
    done = {r["file"] for _, r in records if isinstance(r, dict) and r.get("complete")}
    kept = [raw for raw, r in records if isinstance(r, dict) and r.get("file") in done]
    text = b"".join(raw + b"\n" for raw in kept)
    if text != data:
        from .files import write_output
        write_output(out_path, text.decode())
    return done


def process_file(path: str, options: BatchOptions) -> tuple[str, list[dict], dict]:
    """The JSON records of one file: its function lines and its closing line."""
    start = time.process_time()
    rows: list[dict] = []
    closing: dict = {"file": path, "complete": True}
    try:
        from .ptx import parse_file
        module = parse_file(path)
        closing["warnings"] = [str(w) for w in module.warnings]
        if options.analyze:
            rows = _analyze_rows(module)
        else:
            rows = _allocate_rows(module, options)
    except PtxallocError as e:
        closing["error"] = str(e)
        rows = []
    except RecursionError:
        closing["error"] = "internal error: input too deeply nested"
        rows = []
    except Exception as e:  # an internal bug: recorded, the batch goes on
        closing["error"] = f"internal error: {type(e).__name__}: {e}"
        rows = []
    closing["functions"] = len(rows)
    closing["seconds"] = round(time.process_time() - start, 4)
    return path, [{"file": path, "function": r.pop("function"), **r} for r in rows], closing


def _allocate_rows(module, options: BatchOptions) -> list[dict]:
    from .alloc.driver import Options
    from .pipeline import allocate_module

    result = allocate_module(module, options.registers, options.allocator,
                             verify=options.verify,
                             options=Options(allocator=options.allocator))
    rows = []
    for fr in result.functions:
        r = fr.report()
        r["function"] = r.pop("name")
        rows.append(r)
    return rows


def _analyze_rows(module) -> list[dict]:
    from .analysis import analyze_function
    from .analysis.static_shared import own_static_shared
    from .target.register_limit import fixed_budgets
    from .report.analysis_report import function_row
    from .target.sm import profile_for_module

    sm = profile_for_module(None, module)
    budgets = fixed_budgets(module, sm, None)
    rows = []
    decls = module.declarations()
    for fn in module.functions:
        limit = budgets[fn.name]
        r = function_row(analyze_function(fn, sm), sm, limit.registers,
                         budget_from=limit.source, static_shared=own_static_shared(fn, decls))
        r["function"] = r.pop("name")
        rows.append(r)
    return rows


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the parent's to handle


def _worker(job: tuple[str, BatchOptions]):
    return process_file(*job)


def _append(out, records: list[dict]) -> None:
    """Write the records as whole lines in one write, SIGINT held off until it is done."""
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        out.write(text)
        out.flush()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def run_batch(paths: list[str], out_path: str, options: BatchOptions, jobs: int = 1,
              progress=None, dask: str | None = None) -> Summary:
    """Process every file not already complete in ``out_path`` (on the dask.distributed
    scheduler at ``dask`` when given, else in ``jobs`` local processes); returns the summary.
    Raises KeyboardInterrupt (after the lines of every finished file are written) on Ctrl-C."""
    from .files import check_paths

    files = expand_inputs(paths)
    if out_path == "-" or not out_path:
        raise UsageError("--out must name a file (results are appended to it and resumed from)")
    check_paths(files, {"--out": out_path})
    done = completed_files(out_path)
    todo = [p for p in files if p not in done]
    summary = Summary(files=len(files), skipped=len(files) - len(todo))
    show = progress if progress is not None else (sys.stderr.isatty() and
                                                 (lambda s: print(s, end="", file=sys.stderr,
                                                                  flush=True)))
    try:
        out = open(out_path, "a", encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{out_path}: cannot write: {e.strerror}") from None
    with out:
        if dask is not None:
            engine = _DaskEngine(dask, todo, options) if todo else None
            results = engine.results() if engine else iter(())
        elif jobs <= 1 or len(todo) <= 1:
            engine = None
            results = (process_file(p, options) for p in todo)
        else:
            engine = _PoolEngine(jobs, todo, options)
            results = engine.results()
        try:
            for k, (path, rows, closing) in enumerate(results, 1):
                if rows is None:                # not processed: no lines, retried on resume
                    summary.failed.append((path, closing["error"]))
                    continue
                _append(out, rows + [closing])
                summary.functions += len(rows)
                summary.seconds += closing["seconds"]
                summary.slowest.append((closing["seconds"], path))
                if "error" in closing:
                    summary.failed.append((path, closing["error"]))
                if show:
                    show(f"\r[{k}/{len(todo)}] {os.path.basename(path)[:50]:50}")
        except KeyboardInterrupt:
            if engine is not None:
                engine.terminate()
            raise
        finally:
            if show:
                show("\n")
            if engine is not None:
                engine.close()
    summary.slowest.sort(reverse=True)
    return summary


class _PoolEngine:
    """The files shared out to ``jobs`` local worker processes (forked: the package is
    already imported), results in the order they finish."""

    def __init__(self, jobs: int, todo: list[str], options: BatchOptions):
        import multiprocessing
        self.pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_worker_init)
        self.jobs = [(p, options) for p in todo]

    def results(self):
        return self.pool.imap_unordered(_worker, self.jobs)

    def terminate(self) -> None:
        self.pool.terminate()

    def close(self) -> None:
        self.pool.close()
        self.pool.join()


class _DaskEngine:
    """The files as tasks of a dask.distributed scheduler, results in the order they finish;
    the same :func:`process_file` runs on the workers."""

    def __init__(self, address: str, todo: list[str], options: BatchOptions):
        try:
            from distributed import Client
        except ImportError:
            raise UsageError("--dask needs dask.distributed: pip install 'ptxalloc[dask]'") \
                from None
        try:
            self.client = Client(address, timeout=30, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            raise UsageError(f"--dask {address}: cannot reach the scheduler: {e}") from None
        self.todo = todo
        self.futures = self.client.map(process_file, todo, options=options, pure=False)

    def results(self):
        from distributed import as_completed
        path_of = dict(zip(self.futures, self.todo))
        for future in as_completed(self.futures, loop=self.client.loop):
            try:
                yield future.result()
            except Exception as e:          # the task itself was lost (a worker died)
                yield path_of[future], None, {"error": f"dask: {type(e).__name__}: {e}"}

    def terminate(self) -> None:
        self.client.cancel(self.futures)

    def close(self) -> None:
        self.client.close()


def format_summary(s: Summary, out_path: str) -> str:
    done = s.files - s.skipped
    lines = [f"{'files':28} {s.files}",
             f"{'  already complete (skipped)':28} {s.skipped}",
             f"{'  processed':28} {done}",
             f"{'  failed':28} {len(s.failed)}",
             f"{'functions':28} {s.functions}",
             f"{'CPU seconds (workers)':28} {s.seconds:.2f}"]
    for path, err in s.failed[:10]:
        lines.append(f"  failed: {err if err.startswith(path) else f'{path}: {err}'}")
    if s.slowest:
        lines.append("slowest:")
        lines += [f"  {sec:8.2f} s  {path}" for sec, path in s.slowest[:5]]
    lines.append(f"results: {out_path}")
    return "\n".join(lines)
