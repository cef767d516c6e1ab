"""What ptxas makes of merged spill accesses (issue 13, knob ``SpillVectorize``): per file,
the allocated PTX with the knob on and off, its spill instructions in PTX, and the local
memory instructions of the SASS ptxas assembles from it (``cuobjdump -sass``: ``STL``/``LDL``
by width, ``.64`` and ``.128`` the vector forms).

    PYTHONPATH=src python3 bench/vector_spill_sass.py [FILE:K[:ARCH] ...]

Needs ptxas and cuobjdump on the PATH (``pip install --user nvidia-cuda-cuobjdump`` puts it
under ``~/.local/lib/python3.*/site-packages/nvidia/cu13/bin``; it is no dependency of the
project). ARCH defaults to the file's ``.target`` (``-arch=sm_80`` for sm_80 files).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = [f"{REPO}/tests/data/triton/sm80_attn_fwd.ptx:32",
           f"{REPO}/../shared/corpus/nvcc/mykernels_sm90.ptx:32",
           f"{REPO}/../shared/corpus/gpuocelot/tests/ptx/sdk2.2/bodysystemcuda.ptx:32"]
SASS_LOCAL = re.compile(r"\b(STL|LDL)(\.[\w.]+)?\s")
PTX_SPILL = re.compile(r"//@(spill|reload|save|restore|csave|crestore) ")


def sass_counts(ptx: str, arch: str) -> Counter:
    """``STL``/``LDL`` instructions of the SASS by form (``STL.64``, ``LDL.128`` ...)."""
    with tempfile.TemporaryDirectory() as d:
        src, obj = Path(d) / "a.ptx", Path(d) / "a.cubin"
        src.write_text(ptx)
        subprocess.run(["ptxas", f"-arch={arch}", str(src), "-o", str(obj)], check=True,
                       capture_output=True)
        sass = subprocess.run(["cuobjdump", "-sass", str(obj)], check=True,
                              capture_output=True, text=True).stdout
    return Counter(m.group(1) + (m.group(2) or "") for m in SASS_LOCAL.finditer(sass))


def main(argv: list[str]) -> int:
    from ptxalloc.pipeline import allocate
    from ptxalloc.ptxas import arch_for
    from ptxalloc.ptx import parse
    for spec in argv or DEFAULT:
        path, k, *arch = spec.split(":")
        text = Path(path).read_text()
        arch = arch[0] if arch else arch_for(parse(text).sm)
        print(f"{Path(path).name} K={k} -arch={arch}")
        for knob in (0, 1):
            res = allocate(text, registers=int(k), knobs={"SpillVectorize": knob})
            ptx_lines = len(PTX_SPILL.findall(res.ptx))
            nbytes = sum(f.spill_stores_bytes + f.spill_loads_bytes for f in res.functions)
            sass = sass_counts(res.ptx, arch)
            forms = " ".join(f"{f}={n}" for f, n in sorted(sass.items()))
            print(f"  SpillVectorize={knob}: PTX spill instructions {ptx_lines}, spill bytes "
                  f"{nbytes}; SASS {sum(sass.values())} local accesses: {forms}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
