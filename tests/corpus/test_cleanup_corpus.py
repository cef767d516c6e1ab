"""Copy propagation and dead-code elimination after allocation on the corpus (issue 13;
``alloc/cleanup.py``, knob ``PostAllocCleanup``): a sample of files spread over the corpus at
K = 24, 32 and 255, every allocation proven from the original file (what ``ptxalloc verify
ORIGINAL ALLOCATED`` does) and assembled by ptxas, with the registers and spill bytes of the
allocation without the pass; over the sample the pass removes instructions."""

from __future__ import annotations

import pytest

from conftest import assert_chain_proven_and_assembles, corpus_files, corpus_module
from ptxalloc.alloc.driver import Options
from ptxalloc.pipeline import allocate_what_fits

pytestmark = pytest.mark.corpus


def _sample() -> list[str]:
    """Every 15th corpus file of at most 3,000 lines (deterministic, spread over the MANIFEST
    order)."""
    files = [f for f in corpus_files() if f["lines"] <= 3000]
    return [f["path"] for f in files[::15]]


SAMPLE = _sample() or [pytest.param(None, marks=pytest.mark.skip(reason="no corpus"))]
REMOVED: dict = {}


@pytest.mark.parametrize("k", [24, 32, 255])
@pytest.mark.parametrize("path", SAMPLE)
def test_cleaned_allocations_proven_assembled_and_unchanged_in_figures(path, k):
    module, arch = corpus_module(path)
    res, kept, _refused = allocate_what_fits(module, registers=k)
    off, _, _ = allocate_what_fits(kept, registers=k,
                                   options=Options(knobs={"PostAllocCleanup": 0}))
    for a, b in zip(res.functions, off.functions):
        assert (a.registers, a.spill_stores_bytes, a.spill_loads_bytes) == \
            (b.registers, b.spill_stores_bytes, b.spill_loads_bytes), a.name
        REMOVED[(path, k, a.name)] = sum(a.extra.get("cleanup", {}).get(key, 0) for key in (
            "moves_removed", "inserted_removed", "original_removed"))
    assert_chain_proven_and_assembles(kept, res, arch)


def test_the_sample_loses_instructions():
    """Runs after the cases above (file order): over the sample, something was removed."""
    if not REMOVED:
        pytest.skip("no corpus case ran")
    assert sum(REMOVED.values()) > 0
