"""The measured effect of seed 004's two pre-passes before allocation (issue 17):
HoistInvariants (:mod:`ptxalloc.passes.hoist`, knob ``hoist``) and
ConvertMemoryToRegisterOrUniform (:mod:`ptxalloc.passes.promote`, knob ``promote``); and of
pointer families as induction variables (:mod:`ptxalloc.passes.induction`, knob ``induction``,
issue 13), whose MaxLive is compared after recomputation with and without it (the pipeline's
own choice: a function counts as changed only when the pipeline keeps the rewrite).

    PYTHONPATH=src python3 bench/prepass_effect.py --pass hoist|promote|induction [--budgets 32,255]
        [--allocator briggs] [--sources corpus,triton] [--every N] [--files F.ptx ...]
        [--value 2]

Per source: functions the pass changed, what it did (instructions hoisted and loops, or arrays,
local bytes, slots and registers added), the sum of MaxLive (general registers, as written and
transformed, over the changed functions), and per budget the registers used and spill bytes
(stores plus reloads) with the knob off and on, over the changed functions; every allocation
with the knob on is proven by the checker through the whole chain from the original. A function
refused at a budget (an instruction needs more) is left out of both columns there.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, corpus_root, manifest  # noqa: E402

from ptxalloc.alloc.driver import Options  # noqa: E402
from ptxalloc.analysis import analyze_function  # noqa: E402
from ptxalloc.errors import AllocationError  # noqa: E402
from ptxalloc.pipeline import allocate_module  # noqa: E402
from ptxalloc.ptx.parser import parse  # noqa: E402
from ptxalloc.target.sm import profile_for_module  # noqa: E402


def sources(which: list[str], every: int, files: list[str]) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    if files:
        out["files"] = [Path(f) for f in files]
        return out
    if "corpus" in which:
        root = corpus_root()
        names = sorted(f["path"] for f in manifest() if f["ptxas"]["ok"])
        out["corpus"] = [root / p for p in names[::every]]
    if "triton" in which:
        out["triton"] = sorted((REPO / "tests" / "data" / "triton").glob("*.ptx"))
    return out


def run_pass(name: str, fn, module, value: int = 1):
    if name == "induction":
        from types import SimpleNamespace

        from ptxalloc.pipeline import pre_passes
        without, _ = pre_passes(fn, Options())
        got, marks = pre_passes(fn, Options(knobs={"induction": 1}))
        report = next((m[2] for m in marks if m[0] == "induction"), None)
        if report is None:
            return None
        return SimpleNamespace(function=got, report=lambda: report, before=without)
    if name == "hoist":
        from ptxalloc.passes.hoist import hoist_function
        return hoist_function(fn, innermost_only=value == 2)
    from ptxalloc.passes.promote import promote_function
    return promote_function(fn, "\n".join(module.declarations()))


def measure(paths: list[Path], name: str, budgets: list[int], allocator: str,
            value: int = 1) -> dict:
    t = {"functions": 0, "changed": 0, "what": {}, "maxlive": [0, 0], "raised": 0,
         "lowered": 0, "pass_s": 0.0, "alloc": {}}
    for path in paths:
        try:
            module = parse(path.read_text(errors="replace"), str(path))
        except Exception:               # noqa: BLE001 - a file the parser refuses
            continue
        sm = profile_for_module(None, module)
        for fn in module.functions:
            t["functions"] += 1
            t0 = time.perf_counter()
            try:
                res = run_pass(name, fn, module, value)
            except Exception:           # noqa: BLE001 - e.g. a CFG the IR refuses
                continue
            t["pass_s"] += time.perf_counter() - t0
            if res is None:
                continue
            t["changed"] += 1
            for k, v in res.report().items():
                t["what"][k] = t["what"].get(k, 0) + v
            before = analyze_function(getattr(res, "before", fn), sm).pressure.max_live
            after = analyze_function(res.function, sm).pressure.max_live
            t["maxlive"][0] += before
            t["maxlive"][1] += after
            t["raised"] += after > before
            t["lowered"] += after < before
            for k in budgets:
                row = t["alloc"].setdefault(k, [0, 0, 0, 0, 0])
                got = []
                try:
                    for on in (0, 1):
                        r = allocate_module(module, k, allocator, function=fn.name,
                                            options=Options(allocator=allocator,
                                                            knobs={name: on * value}))
                        f = r.functions[0]
                        assert f.verified
                        got.append((f.registers, f.spill_stores_bytes + f.spill_loads_bytes))
                except AllocationError:
                    row[4] += 1
                    continue
                row[0] += got[0][0]
                row[1] += got[1][0]
                row[2] += got[0][1]
                row[3] += got[1][1]
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pass", dest="name", choices=("hoist", "promote", "induction"), required=True)
    ap.add_argument("--budgets", default="32,255", help="empty: no allocation")
    ap.add_argument("--allocator", default="briggs")
    ap.add_argument("--sources", default="corpus,triton")
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--files", nargs="*", default=[])
    ap.add_argument("--value", type=int, default=1, help="the knob's value when on (hoist=2: "
                    "innermost loops only)")
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",") if b]
    for src, paths in sources(args.sources.split(","), args.every, args.files).items():
        t0 = time.process_time()
        t = measure(paths, args.name, budgets, args.allocator, args.value)
        print(f"## {args.name}={args.value} on {src}: {len(paths)} files, "
              f"{t['functions']} functions ({time.process_time() - t0:.0f} s CPU)")
        what = ", ".join(f"{k} {v}" for k, v in t["what"].items())
        print(f"changed {t['changed']} functions ({what}) in {t['pass_s']:.2f} s; sum of "
              f"MaxLive over them {t['maxlive'][0]} -> {t['maxlive'][1]} (raised in "
              f"{t['raised']}, lowered in {t['lowered']})")
        print(f"| {args.allocator} K | registers, off | registers, on | spill bytes, off "
              f"| spill bytes, on | refused |")
        print("| --- | --- | --- | --- | --- | --- |")
        for k, (r0, r1, s0, s1, refused) in sorted(t["alloc"].items()):
            print(f"| {k} | {r0:,} | {r1:,} | {s0:,} | {s1:,} | {refused} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
