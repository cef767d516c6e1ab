"""Parse + CFG time of the two largest corpus files next to ptxas's wall time on the same file in
the same run (issue: PTX front end). Target: parse + CFG at most half of ptxas's time.

    python3 bench/front_end.py
"""

from __future__ import annotations

import sys

from common import best_of, corpus_root, manifest, ptxas_seconds

from ptxalloc.ir.cfg import CFG
from ptxalloc.ptx import parse_file

FILES = ["gpuocelot/tests/ptx/unstructured/renderer.ptx",
         "ptx90parser/tests/sample/matrix_free_device_matrix_vector_01.1.sm_80.ptx"]


def main() -> int:
    root = corpus_root()
    arch = {f["path"]: f["ptxas_arch"] for f in manifest()}
    print(f"{'file':<74} {'lines':>7} {'parse s':>8} {'cfg s':>7} {'ptxas s':>8} {'ratio':>6}")
    for rel in FILES:
        path = str(root / rel)
        lines = sum(1 for _ in open(path))
        parse_s = best_of(lambda: parse_file(path))
        module = parse_file(path)
        cfg_s = best_of(lambda: [CFG(f) for f in module.functions])
        px = ptxas_seconds(path, arch[rel])
        ratio = f"{(parse_s + cfg_s) / px:.2f}" if px else "n/a"
        print(f"{rel:<74} {lines:>7} {parse_s:>8.3f} {cfg_s:>7.3f} "
              f"{px if px is not None else float('nan'):>8.3f} {ratio:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
