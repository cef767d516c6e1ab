"""Predicates recomputed at their guarded accesses (issue 13, :mod:`ptxalloc.passes.recompute`):
where a function keeps more predicates live than P0-P6 hold, the recomputation offers a second
plan that reads the predicates' 32-bit operands at the use; the pipeline schedules both and keeps
the one needing fewer registers (MaxLive plus the predicates beyond the file).

    PYTHONPATH=src python3 bench/predicate_trade.py [--sources corpus,triton]

Per source: functions, those with more than 7 predicates live, those where the trade gives a
plan of its own (each proven by :mod:`ptxalloc.verify.recompute`), and per such function MaxLive
(general registers, predicates) after the recomputation and the schedule without and with the
trade, and which one the pipeline keeps.
"""

from __future__ import annotations

import argparse
import sys
import time

from common import REPO, corpus_root, manifest

from ptxalloc.analysis import pressure_of
from ptxalloc.passes.recompute import recompute_choices, registers_needed
from ptxalloc.passes.schedule import schedule_function
from ptxalloc.ptx import parse_file
from ptxalloc.target.units import PRED_REGS
from ptxalloc.verify.recompute import check_recomputation


def scheduled_max_live(fn) -> tuple[int, int]:
    s = schedule_function(fn)
    p = pressure_of(s.function if s else fn)
    return p.max_live, p.max_preds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", default="corpus,triton")
    a = ap.parse_args()
    paths: dict[str, list[str]] = {}
    if "corpus" in a.sources and corpus_root() is not None:
        paths["corpus"] = [str(corpus_root() / f["path"]) for f in manifest() if f["ptxas"]["ok"]]
    if "triton" in a.sources:
        paths["triton"] = [str(p) for p in sorted((REPO / "tests" / "data" / "triton").glob("*.ptx"))]
    for source, files in paths.items():
        t0 = time.process_time()
        n = over = offered = taken = 0
        rows = []
        for path in files:
            for fn in parse_file(path).functions:
                n += 1
                if pressure_of(fn).max_preds <= PRED_REGS:
                    continue
                over += 1
                plain, traded = (recompute_choices(fn) + [None])[:2]
                if traded is None:
                    continue
                offered += 1
                check_recomputation(fn, traded.function)
                without = scheduled_max_live(plain.function if plain else fn)
                with_ = scheduled_max_live(traded.function)
                kept = registers_needed(with_) < registers_needed(without)
                taken += kept
                rows.append(f"  {path.rsplit('/', 1)[-1]} {fn.name[:40]}: without {without}, "
                            f"with {with_}: {'traded' if kept else 'not traded'}")
        print(f"{source}: {n} functions, {over} with more than {PRED_REGS} predicates live, "
              f"a trade plan of its own in {offered} (all proven), kept in {taken} "
              f"({time.process_time() - t0:.1f} s CPU)")
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
