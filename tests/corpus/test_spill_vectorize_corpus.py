"""Merged spill accesses on the corpus (issue 13, knob ``SpillVectorize``, on by default):
a sample of the corpus (every 24th file ptxas accepts) at K = 24 and 32 with briggs, every
allocation proven by the checker from the original and assembled by ptxas, with the same
spill bytes, frame bytes and registers as with the knob off; and nvcc's WMMA kernel at K = 32,
where most spill code merges. Skipped where ``../shared/corpus`` is absent."""

from __future__ import annotations

import re

import pytest

from conftest import corpus_files, corpus_root
from ptxalloc import ptxas
from ptxalloc.errors import AllocationError
from ptxalloc.pipeline import allocate

pytestmark = pytest.mark.corpus

SAMPLE = [(f["path"], f["ptxas_arch"]) for f in corpus_files()[::24]] if corpus_root() else []
MERGED = re.compile(r"^\s*(?:st|ld)\.local\.v[24]\.b(?:32|64)\s.*//@\w+ \S+ \S+", re.M)


def _figures(res) -> list[tuple]:
    return [(f.name, f.spill_stores_bytes, f.spill_loads_bytes, f.stack_frame_bytes,
             f.registers) for f in res.functions]


@pytest.mark.ptxas
@pytest.mark.parametrize("k", [24, 32])
@pytest.mark.parametrize("path,arch", SAMPLE or [pytest.param(
    None, None, marks=pytest.mark.skip(reason="../shared/corpus is absent"))],
    ids=[p for p, _ in SAMPLE] or None)
def test_merged_allocations_are_proven_with_the_same_figures(path, arch, k):
    text = (corpus_root() / path).read_text()
    try:
        on = allocate(text, registers=k, filename=path)
    except AllocationError as e:
        pytest.skip(f"refused at K = {k}: {e}")
    off = allocate(text, registers=k, filename=path, knobs={"SpillVectorize": 0},
                   verify=False)
    assert {f.verified for f in on.functions} == {True}
    assert _figures(on) == _figures(off)
    assert not MERGED.search(off.ptx)
    if ptxas.available():
        got = ptxas.assemble(on.ptx, arch)
        assert got.ok, got.output


def test_most_spill_code_of_a_wmma_kernel_merges():
    """nvcc's wmma_gemm at K = 32 stores the fragments of its ``wmma.load`` results and
    reloads them before each ``wmma.mma``: 1,000-odd scalar accesses, most in runs of four."""
    if corpus_root() is None:
        pytest.skip("../shared/corpus is absent")
    text = (corpus_root() / "nvcc" / "mykernels_sm90.ptx").read_text()
    on = allocate(text, registers=32)
    gemm = next(f for f in on.functions if f.name == "wmma_gemm")
    saved = gemm.extra["spill_vectorize"]["instructions_saved"]
    merged = len(MERGED.findall(gemm.text))
    assert merged >= 50 and saved >= 2 * merged, (merged, saved)
    assert gemm.verified
