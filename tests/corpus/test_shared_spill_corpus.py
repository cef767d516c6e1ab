"""``--spill-to shared`` on corpus kernels (issue 17): kernels with ``.maxntid`` (a thrust
scan, a TVM wgmma GEMM) and without launch bounds (``--block-size 256``: CUDA SDK samples) at
a low budget; every allocation is proven by the checker and assembled by ptxas, whose
``N bytes smem`` covers the spill area."""

from __future__ import annotations

import pytest

from conftest import corpus_root
from ptxalloc import ptxas
from ptxalloc.alloc.driver import Options
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file

pytestmark = pytest.mark.corpus

CASES = [
    # (file, function (substring), budget, --block-size)
    ("gpuocelot/tests/ptx/thrust/histogram_sliced.ptx", "ScanScatterDigits", 24, None),
    ("ptxbench/trial_turn3_exp019_gemm.ptx", "gemm_kernel", 48, None),
    # (at 16 it spills nothing since recomputation extends shared operands: 12)
    ("gpuocelot/tests/cuda2.2/tests/simplerCUFFT/kernel.ptx", "SP_c2c_radix2", 12, 256),
    ("gpuocelot/tests/cuda3.2/data/matrixMul_kernel.ptx", "matrixMul", 16, 256),
    ("gpuocelot/tests/cuda3.2/data/simpleTexture_kernel.ptx", "transformKernel", 16, 256),
]


@pytest.mark.parametrize("path,function,k,block", CASES, ids=[c[0] for c in CASES])
def test_shared_spilling_on_the_corpus(path, function, k, block):
    root = corpus_root()
    if root is None:
        pytest.skip("../shared/corpus is absent")
    module = parse_file(str(root / path))
    (fn,) = ([f for f in module.functions if f.name == function]
             or [f for f in module.functions if function in f.name])
    res = allocate_module(module, k, function=fn.name,
                          options=Options(spill_to="shared", block_size=block))
    (r,) = res.functions
    assert r.verified and r.registers <= k
    area = r.extra["shared_spill"]
    assert area["bytes"] == area["frame_bytes"] * area["block_size"] > 0
    assert r.stack_frame_bytes == 0 and r.spill_stores_bytes > 0
    assert area["block_size"] == (block or 128)
    spills = [line for line in r.text.splitlines() if "//@spill" in line]
    assert spills and all("st.shared." in line for line in spills)
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    got = ptxas.assemble(res.ptx, ptxas.arch_for(module.target[0] if module.target else None))
    assert got.ok, got.output
    assert got.functions[fn.name].smem >= area["bytes"]
