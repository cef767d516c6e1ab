"""Allocation quality beside ptxas (issue 13): spill bytes per source and budget for every
registered allocator, and at K = 255 the registers used against ptxas's "Used N registers" and
against MaxLive.

Sources: ``corpus`` (every MANIFEST file ptxas accepts) and ``triton`` (``tests/data/triton/*.ptx``:
the tutorial kernels for sm_80 and the sm_90a attention kernels). For every function of every
file, at each budget K and for each allocator, ``allocate_function`` (analysis, coalescing,
coloring, spill rounds, post-allocation clean-up and output) gives the spill bytes (stores +
loads) and registers, and the independent checker proves every allocation of the file from the
original text, as ``ptxalloc allocate`` does (``--no-verify`` skips it: faster, unproven
figures; a refuted allocation is counted under ``unproven`` and makes the run exit 1); ``ptxas -v -maxrregcount=K --override-directive-values`` gives
ptxas's for the same functions. Totals are over the functions ptxas reports that the allocator
did not refuse (a function with an instruction needing more than K registers at once is counted
apart). At K = 255:

* ``<= ptxas``: share of functions whose registers are no more than ptxas's Used N (goal 90 %);
* ``= MaxLive``: share whose registers equal the lower bound, MaxLive of the code the allocator
  colored (``max_live_legalized``; goal 95 %);
* ``= floor``: share whose registers equal the report's ``register_floor``: MaxLive, or more
  where predicates beyond P0-P6 live in general registers or the calling convention puts
  values live across a call in R24 up (MaxLive is no bound the convention lets an
  allocation reach: docs/decisions.md, "Registers = MaxLive at K = 255, session 7").

The register copies that splitting at block ends leaves in the code (``alloc/block_split.py``,
instructions the input does not have) are counted per row (``split_copies``) and printed
under the table. ``spill ins`` counts the spill stores and reloads (saves, restores and callee
saves too) as PTX instructions, a merged ``.v2``/``.v4`` access once (knob ``SpillVectorize``,
spill/vectorize.py, applied as the pipeline applies it); the spill frames' bytes are printed
under the table.

    PYTHONPATH=src python3 bench/quality.py [--sources corpus,triton] [--files N]
        [--budgets 24,32,64,128,255] [--allocators briggs,...] [--jobs N]
        [--knob NAME=VALUE ...] [--uniform] [--json FILE]

``--files N`` samples N corpus files evenly spread over the MANIFEST order (deterministic), so
that a run fits the time at hand; ``--knob`` sets ptxalloc knobs (e.g. ``RematParamLoads=0``)
for every allocator, to measure a pass on and off; ``--uniform`` allocates uniform values to
UR/UP as ``allocate --uniform`` does (ptxas itself uses uniform registers from sm_75 on).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from common import REPO, choose_allocators, corpus_root, manifest, ptxas_budget_flags

TRITON_DIR = REPO / "tests" / "data" / "triton"


def measure(source: str, path: str, arch: str | None, budgets: list[int], allocators: list[str],
            knobs: dict, uniform: bool = False, verify: bool = True) -> dict:
    """{K: {function: {allocator or "ptxas": row or None}}} for one file, and the
    allocations the checker refuted (``unproven``: [(K, allocator, message)])."""
    from ptxalloc import ptxas
    from ptxalloc.alloc.driver import Options, allocate_function
    from ptxalloc.alloc.output import mark_prepass
    from ptxalloc.errors import AllocationError, VerificationError
    from ptxalloc.ptx import emit_function, emit_module
    from ptxalloc.verify import verify_module_text
    from ptxalloc.pipeline import allocate_kept, pre_passes, vectorize_spill_code
    from ptxalloc.records import replace
    from ptxalloc.ptx import parse_file
    from ptxalloc.target.sm import profile_for

    module = parse_file(path)
    sm = profile_for(None, module.sm)
    arch = arch or ptxas.arch_for(module.sm)
    decls = module.declarations()
    # the passes before allocation as the pipeline runs them (the knobs hoist, promote,
    # recompute, schedule; with schedule=2, the code as written too where the scheduled spills)
    options = Options(knobs=dict(knobs))
    prepared = [(original, *pre_passes(original, options, decls))
                for original in module.functions]
    unscheduled: dict = {}

    def as_written(original):
        if original.name not in unscheduled:
            unscheduled[original.name] = pre_passes(
                original, replace(options, knobs={**knobs, "schedule": 0}), decls)
        return unscheduled[original.name]

    out: dict = {}
    unproven: list = []
    proven = 0
    for k in budgets:
        rows: dict = {fn.name: {} for fn in module.functions}
        kept: dict = {alloc: [] for alloc in allocators}
        for original, fn, marks in prepared:
            for alloc in allocators:
                chosen = Options(allocator=alloc, knobs=dict(knobs), uniform=uniform)

                def allocate(f, chosen=chosen, k=k):
                    return allocate_function(f, sm, k, chosen, decls)

                try:
                    _, kept_marks, r = allocate_kept(
                        original, chosen, decls, fn, marks, allocate,
                        lambda original=original: as_written(original))
                except AllocationError:
                    rows[fn.name][alloc] = None
                    continue
                vectorize_spill_code(r, chosen)
                kept[alloc].append((r, kept_marks))
                rows[fn.name][alloc] = {"registers": r.registers,
                                        "spill": r.spill_stores_bytes + r.spill_loads_bytes,
                                        "frame": r.stack_frame_bytes,
                                        "max_live": r.max_live_legalized,
                                        # MaxLive, or what predicates beyond P0-P6 or the
                                        # calling convention add to it (the report's
                                        # register_floor)
                                        "floor": r.extra["register_floor"]["registers"],
                                        "remat": r.rematerialized,
                                        # spill stores and reloads (saves, restores and
                                        # callee saves too) as PTX instructions: a merged
                                        # .v2/.v4 access counts once (SpillVectorize)
                                        "spill_instructions": sum(
                                            1 for ins in r.function.instructions()
                                            if ins.origin is not None
                                            and (ins.origin.stores or ins.origin.loads)),
                                        # register copies of alloc/block_split.py
                                        "split_copies": r.extra.get("block_split", {}).get(
                                            "copies", 0)}
        if verify:
            for alloc, done in kept.items():
                texts = {}
                for r, kept_marks in done:
                    for key, lines, _report in kept_marks:
                        mark_prepass(r.function, key, lines)
                    texts[r.function.name] = emit_function(r.function, r.names.__getitem__)
                try:
                    verify_module_text(module, emit_module(module, texts),
                                       [r for r, _ in done])
                    proven += sum(r.verified for r, _ in done)
                except VerificationError as e:
                    unproven.append((k, alloc, str(e)))
        if ptxas.available():
            a = ptxas.assemble_file(path, arch, ptxas_budget_flags(k))
            for name, fig in a.functions.items():
                if a.ok and name in rows and fig.registers is not None:
                    rows[name]["ptxas"] = {"registers": fig.registers,
                                           "spill": (fig.spill_stores or 0)
                                           + (fig.spill_loads or 0)}
        out[k] = rows
    return {"source": source, "path": path, "budgets": out, "unproven": unproven,
            "proven": proven}


def _files(sources: list[str], n: int) -> list[tuple[str, str, str | None]]:
    files = []
    if "corpus" in sources and corpus_root() is not None:
        chosen = [f for f in manifest() if f["ptxas"]["ok"]]
        if n and n < len(chosen):
            step = len(chosen) / n
            chosen = [chosen[int(i * step)] for i in range(n)]
        root = corpus_root()
        files += [("corpus", str(root / f["path"]), f["ptxas_arch"]) for f in chosen]
    if "triton" in sources:
        files += [("triton", str(p), None) for p in sorted(TRITON_DIR.glob("*.ptx"))]
    return files


def summarize(results: list[dict], budgets: list[int], allocators: list[str]) -> list[dict]:
    """One row per (source, K, allocator)."""
    rows = []
    for source in dict.fromkeys(r["source"] for r in results):
        for k in budgets:
            for alloc in allocators:
                t = {"source": source, "K": k, "allocator": alloc, "functions": 0,
                     "refused": 0, "spill": 0, "ptxas_spill": 0, "le_ptxas": 0,
                     "eq_maxlive": 0, "eq_floor": 0, "registers": 0, "ptxas_registers": 0, "remat": 0,
                     "split_copies": 0, "spill_instructions": 0, "frame": 0}
                for res in results:
                    if res["source"] != source:
                        continue
                    for got in res["budgets"][k].values():
                        px = got.get("ptxas")
                        if px is None:
                            continue
                        mine = got.get(alloc)
                        if mine is None:
                            t["refused"] += 1
                            continue
                        t["functions"] += 1
                        t["spill"] += mine["spill"]
                        t["ptxas_spill"] += px["spill"]
                        t["registers"] += mine["registers"]
                        t["ptxas_registers"] += px["registers"]
                        t["remat"] += mine["remat"]
                        t["split_copies"] += mine.get("split_copies", 0)
                        t["spill_instructions"] += mine.get("spill_instructions", 0)
                        t["frame"] += mine.get("frame", 0)
                        t["le_ptxas"] += mine["registers"] <= px["registers"]
                        t["eq_maxlive"] += mine["registers"] <= mine["max_live"]
                        t["eq_floor"] += mine["registers"] <= mine.get("floor",
                                                                       mine["max_live"])
                rows.append(t)
    return rows


def print_table(rows: list[dict]) -> None:
    head = (f"{'source':<7} {'K':>4} {'allocator':<9} {'functions':>9} {'refused':>7} "
            f"{'spill B':>9} {'ptxas B':>9} {'spill ins':>9} {'remat':>6} {'regs':>7} "
            f"{'ptxas regs':>10} "
            f"{'<=ptxas':>8} {'=MaxLive':>8} {'=floor':>7}")
    print(head)
    print("-" * len(head))
    for t in rows:
        n = t["functions"] or 1
        share = (f"{100 * t['le_ptxas'] / n:>7.1f}% {100 * t['eq_maxlive'] / n:>7.1f}% "
                 f"{100 * t['eq_floor'] / n:>6.1f}%"
                 if t["K"] == 255 else f"{'':>8} {'':>8} {'':>7}")
        print(f"{t['source']:<7} {t['K']:>4} {t['allocator']:<9} {t['functions']:>9} "
              f"{t['refused']:>7} {t['spill']:>9} {t['ptxas_spill']:>9} "
              f"{t['spill_instructions']:>9} {t['remat']:>6} "
              f"{t['registers']:>7} {t['ptxas_registers']:>10} {share}")
    print("spill frame bytes: " + ", ".join(
        f"{t['source']} K={t['K']} {t['allocator']} {t['frame']}" for t in rows if t["K"] < 255))
    for t in rows:
        if t.get("split_copies"):
            print(f"{t['source']} K={t['K']} {t['allocator']}: {t['split_copies']} register "
                  "copies inserted by splitting at block ends (alloc/block_split.py)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", default="corpus,triton")
    ap.add_argument("--budgets", default="24,32,64,128,255")
    ap.add_argument("--files", type=int, default=0, help="sample N corpus files (0: all)")
    ap.add_argument("--allocators", help="comma-separated (default: every registered one)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--uniform", action="store_true",
                    help="uniform values to UR/UP (allocate --uniform)")
    ap.add_argument("--json", help="also write the per-function figures here")
    ap.add_argument("--no-verify", action="store_true",
                    help="skip the checker (faster; the figures are then unproven)")
    a = ap.parse_args()
    from ptxalloc import ptxas
    from ptxalloc.alloc.knobs import parse_knobs
    if not ptxas.available():
        raise SystemExit("ptxas is not on the PATH: nothing to compare with")
    knobs = parse_knobs(a.knob)
    allocators = choose_allocators(a.allocators)
    budgets = [int(b) for b in a.budgets.split(",")]
    files = _files(a.sources.split(","), a.files)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=a.jobs) as ex:
        futures = [ex.submit(measure, s, p, arch, budgets, allocators, knobs, a.uniform,
                             not a.no_verify)
                   for s, p, arch in files]
        results = [fu.result() for fu in futures]
    wall = time.perf_counter() - t0
    print(f"{len(files)} files ({a.sources}), {a.jobs} worker(s), {wall:.0f} s wall"
          + (f"; knobs {knobs}" if knobs else "") + ("; uniform" if a.uniform else ""))
    rows = summarize(results, budgets, allocators)
    print_table(rows)
    unproven = [(r["path"], k, alloc, msg) for r in results for k, alloc, msg in r["unproven"]]
    proven = sum(r["proven"] for r in results)
    print("checker: " + ("off (--no-verify): these figures are unproven" if a.no_verify else
                         f"{proven} allocations proven, none refuted" if not unproven else
                         f"{proven} allocations proven, {len(unproven)} (file, K, allocator) "
                         f"REFUTED"))
    for path, k, alloc, msg in unproven:
        print(f"  REFUTED {path} K={k} {alloc}: {msg}")
    if a.json:
        from ptxalloc.files import write_output
        write_output(a.json, json.dumps({"knobs": knobs, "summary": rows,
                                         "files": results}, indent=1) + "\n")
    return 1 if unproven else 0


if __name__ == "__main__":
    sys.exit(main())
