"""Compaction's bounded search on the corpus functions it used to give up on (issue 16, round
2; docs/decisions.md "Register compaction"): forward checking lets the search settle within its
steps graphs where plain DSATUR ran out (convolutionTexture.ptx's unrolled row filters), and a
count proven minimal for the coalesced graph no longer stops the driver from compacting the
graph before coalescing (SobelFilter's copy kernel: 14 registers coalesced, 11 uncoalesced).
Every allocation here is proven by the checker."""

from __future__ import annotations

import pytest

from conftest import assert_verified, corpus_root
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file

pytestmark = pytest.mark.corpus

# (file, function, registers at the default budget before this round, at most now)
CASES = [
    ("gpuocelot/tests/ptx/sdk2.2/convolutionTexture.ptx", "_Z14convolutionRowILi4EEfff", 24, 10),
    ("gpuocelot/tests/ptx/sdk2.2/convolutionTexture.ptx", "_Z14convolutionRowILi2EEfff", 16, 8),
    ("gpuocelot/tests/ptx/sdk2.2/SobelFilter_kernels.ptx", "_Z14SobelCopyImagePhjiif", 14, 11),
    # issue 13, the squeaky wheel: a double reduction whose sum is assigned on two paths (the
    # search gave up after its steps; MaxLive 11)
    ("gpuocelot/tests/ptx/sdk2.2/reduction_kernel.ptx", "_Z17reduce4_SMVERSIONIdLj512EEvPT_S1_j",
     12, 11),
    # the thrust ScanScatter kernels: a 4-aligned group among 32-bit values (MaxLive 34)
    ("gpuocelot/tests/ptx/thrust/histogram.ptx",
     "_ZN6thrust6detail7backend4cuda6detail11b40c_thrust17ScanScatterDigitsIjNS4_12KeysOnlyTypeELi3"
     "ELi4ELi12ENS4_10NopFunctorIjEES8_EEvPbPiPT_SC_PT0_SE_NS4_16CtaDecompositionE", 35, 34),
]


@pytest.mark.parametrize("path,name,before,now", CASES, ids=[c[1] for c in CASES])
def test_compaction_reaches_the_fewer_registers(path, name, before, now):
    root = corpus_root()
    if root is None:
        pytest.skip("../shared/corpus is absent")
    res = allocate_module(parse_file(str(root / path)), function=name)
    assert_verified(res)
    (fr,) = [f for f in res.functions if f.name == name]
    assert fr.spilled_values == 0
    assert fr.registers <= now < before


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
def test_a_large_graph_reaches_max_live_by_one_descent(allocator, monkeypatch):
    """bisect_large's kernel (issue 13, session 7): a 918-node graph, above the search's node
    limit, whose greedy colorings and squeaky wheel end at 46 against MaxLive 45; briggs's
    coalesced graph stays at 46, the graph before coalescing reaches 45 in one DSATUR descent
    at the bound (fat-point's own scan reaches 45). Proven from the original file through the
    pre-passes and assembled by ptxas, at its register floor (MaxLive); without the descent
    briggs uses 46."""
    from conftest import assert_chain_proven_and_assembles, corpus_module
    from ptxalloc.alloc import compact as compact_module
    from ptxalloc.alloc.driver import Options
    name = "_Z17bisectKernelLargePfS_jffjjfPjS0_S_S_S0_S_S_S0_S0_S0_S0_"
    module, arch = corpus_module("gpuocelot/tests/ptx/sdk2.2/bisect_large.ptx")
    res = allocate_module(module, registers=255, function=name,
                          options=Options(allocator=allocator))
    (fr,) = res.functions
    assert fr.spilled_values == 0
    assert fr.registers == fr.max_live_legalized == 45
    assert fr.extra["register_floor"] == {"registers": 45, "from": "MaxLive"}
    assert_chain_proven_and_assembles(module, res, arch)
    if allocator == "briggs":
        monkeypatch.setattr(compact_module, "LARGE_SEARCH_MAX_NODES", 0)
        (without,) = allocate_module(module, registers=255, function=name,
                                     options=Options(allocator=allocator)).functions
        assert without.registers == 46


# (file, function, MaxLive as allocated, register_floor, what sets it): at K = 255 the
# allocation takes exactly its floor, proven (issue 13, session 7; docs/decisions.md)
FLOORS = [
    # 4 registers live across the call to poly() in R24-R27
    ("nvcc/mykernels_sm90.ptx", "saxpy_poly", 8, 28, "calling convention"),
    # bisect_large's kernel at its MaxLive: test_a_large_graph_reaches_max_live_by_one_descent
]


@pytest.mark.parametrize("path,name,max_live,floor,why", FLOORS, ids=[c[1][:30] for c in FLOORS])
def test_the_register_floor_is_reached(path, name, max_live, floor, why):
    from conftest import assert_chain_proven_and_assembles, corpus_module
    module, arch = corpus_module(path)
    for allocator in ("briggs", "fatpoint"):
        res = allocate_module(module, registers=255, function=name, allocator=allocator)
        (fr,) = res.functions
        assert fr.max_live_legalized == max_live
        assert fr.extra["register_floor"] == {"registers": floor, "from": why}
        assert fr.registers == floor, allocator
        assert_chain_proven_and_assembles(module, res, arch)
