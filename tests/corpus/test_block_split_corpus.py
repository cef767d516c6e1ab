"""Splitting at block ends on the corpus functions it brings to MaxLive at K = 255 (issue 13;
``alloc/block_split.py``, docs/decisions.md "Splitting at block ends to reach MaxLive"):
matrixMul's accumulator, loop-carried and redefined in the loop, a register defined twice
in one block (zluda's prmt), and 32-bit values moved out of a wide definition's way inside a
block (zluda's uint_to_fp_bf16, convolutionTexture's row filter). Each allocation is proven from the original file and assembled by
ptxas; without the split (knob ``SplitToMaxLive=0``) each uses one register more."""

from __future__ import annotations

import pytest

from conftest import assert_chain_proven_and_assembles, corpus_module
from ptxalloc.alloc.driver import Options
from ptxalloc.pipeline import allocate_module

pytestmark = pytest.mark.corpus

# (file, function, allocator, registers = MaxLive as allocated, copies left, of them in loops)
CASES = [
    ("gpuocelot/tests/ptx/sdk2.2/matrixMul.ptx", "_Z9matrixMulPfS_S_ii", "briggs", 21, 1, 1),
    ("gpuocelot/tests/ptx/sdk2.2/matrixMul.ptx", "_Z9matrixMulPfS_S_ii", "fatpoint", 21, 1, 1),
    ("gpuocelot/tests/cuda4.1sdk/tests/matrixMulDynlinkJIT/extras/matrixMul_kernel_64.ptx",
     "matrixMul_bs16_32bit", "briggs", 20, 1, 1),
    ("gpuocelot/tests/ptx/sdk2.2/convolutionSeparable.ptx", "_Z17convolutionRowGPUPfS_ii",
     "fatpoint", 8, None, None),
    ("zluda/ptx/src/test/spirv_run/prmt.ptx", "prmt", "briggs", 3, 0, 0),
    # copies inside a block, before a 64-bit definition and among tex coordinate tuples
    ("zluda/ptx/src/test/spirv_run/uint_to_fp_bf16.ptx", "uint_to_fp_bf16", "fatpoint", 3, 1,
     0),
    ("gpuocelot/tests/ptx/sdk2.2/convolutionTexture.ptx", "_Z17convolutionRowGPUPfii", "briggs",
     24, 3, 0),
]


@pytest.mark.parametrize("path,name,allocator,registers,copies,in_loops", CASES,
                         ids=[f"{c[1]}-{c[2]}" for c in CASES])
def test_the_split_reaches_max_live_proven_and_assembled(path, name, allocator, registers,
                                                         copies, in_loops):
    module, arch = corpus_module(path)
    res = allocate_module(module, registers=255, function=name,
                          options=Options(allocator=allocator))
    (fr,) = res.functions
    assert fr.spilled_values == 0
    assert fr.registers == fr.max_live_legalized == registers
    split = fr.extra["block_split"]
    assert split["registers_before"] == registers + 1
    assert split["registers_after"] == registers
    if copies is not None:
        assert (split["copies"], split["copies_in_loops"]) == (copies, in_loops)
    assert res.ptx.count("//@move") >= split["copies"]
    assert_chain_proven_and_assembles(module, res, arch)
    (without,) = allocate_module(module, registers=255, function=name,
                                 options=Options(allocator=allocator,
                                                 knobs={"SplitToMaxLive": 0})).functions
    assert without.registers == registers + 1
    assert "block_split" not in without.extra
