"""Soak the allocators with the fuzz property of ``tests/property/test_fuzz_alloc.py`` (issue 5).

    python bench/fuzz_soak.py --examples 2000 [--seconds 3600] [--seed 1] [--out soak/]

Every random program is allocated by every allocator at K = 2..8 and 255; each allocation must
be proven by the checker and (with ptxas on the PATH) assemble; a refusal must name an
instruction that needs more registers than K. Unlike the CI test, the soak does not stop at a
failure: it writes each failing program to ``--out`` (``fail_<n>.ptx`` with the error in a
comment), and prints the totals: examples run, allocations proven, refusals, failures, and
the slowest example.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "tests" / "property")]

from hypothesis import HealthCheck, given, settings          # noqa: E402
from hypothesis import seed as hypothesis_seed                # noqa: E402
from hypothesis import strategies as st                       # noqa: E402

import test_fuzz_alloc as fuzz                                # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: no limit)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="fuzz_soak_out", help="where failing programs go")
    ap.add_argument("--no-ptxas", action="store_true", help="do not assemble")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    out = Path(args.out)
    totals = {"examples": 0, "proven": 0, "refused": 0, "assembled": 0, "failures": 0}
    slowest = (0.0, "")
    start = time.monotonic()

    class Done(Exception):
        pass

    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.booleans().flatmap(lambda calls: fuzz.programs(calls=calls)))
    def soak(text):
        nonlocal slowest
        if args.seconds and time.monotonic() - start > args.seconds:
            raise Done
        totals["examples"] += 1
        t0 = time.monotonic()
        try:
            got = fuzz.check_program(text, assemble=not args.no_ptxas)
            for k, v in got.items():
                totals[k] += v
        except Exception as e:                    # a finding: keep it and go on
            totals["failures"] += 1
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"fail_{totals['failures']}.ptx"
            message = str(e).split("\n", 1)[0]
            path.write_text(f"// {type(e).__name__}: {message}\n{text}")
            print(f"failure {totals['failures']}: {message[:300]} -> {path}", flush=True)
        dt = time.monotonic() - t0
        if dt > slowest[0]:
            slowest = (dt, text)
        if totals["examples"] % 50 == 0:
            print(f"{totals['examples']} examples, {totals['failures']} failures, "
                  f"{time.monotonic() - start:.0f} s", flush=True)

    if args.seed is not None:
        soak = hypothesis_seed(args.seed)(soak)
    try:
        soak()
    except Done:
        pass
    print(f"examples run: {totals['examples']}; allocations proven: {totals['proven']}, "
          f"assembled by ptxas: {totals['assembled']}, refused (an instruction needs more than "
          f"K): {totals['refused']}; failures: {totals['failures']}")
    if slowest[1]:
        out.mkdir(parents=True, exist_ok=True)
        (out / "slowest.ptx").write_text(slowest[1])
        print(f"slowest example: {slowest[0]:.1f} s ({out / 'slowest.ptx'})")
    return 1 if totals["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
