"""Results written into the registers of a register tuple's dying members (alloc/tuple_reuse.py,
knob ``TupleReuse``, on by default) on real PTX: a sample of the corpus (every 16th file ptxas
accepts), its sm_90a wgmma files (less_slow, the ptxbench GEMM) and Triton's sm_90a attention
forward kernels at K = 255, with both coalescing allocators. Every allocation is proven from
the original text through its pass records and assembles with ptxas; over the sample the
merges fire and never cost a register in total. Skipped where ``../shared/corpus`` is absent
(the Triton files still run).
"""

from __future__ import annotations

import functools

import pytest

from conftest import DATA, assert_chain_proven_and_assembles, assert_verified, corpus_files, \
    corpus_root
from ptxalloc.alloc.driver import Options
from ptxalloc.errors import AllocationError
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse

K = 255
SM90A = ("less_slow/less_slow_sm90a.ptx", "ptxbench/trial_turn3_exp019_gemm.ptx")


def _sample() -> list:
    files = []
    root = corpus_root()
    if root is not None:
        files = [(root / f["path"], f["ptxas_arch"]) for f in corpus_files()[::16]]
        files += [(root / p, "sm_90a") for p in SM90A if (root / p).exists()]
    return files + [(DATA / "triton" / f"{stem}.ptx", "sm_90a")
                    for stem in ("attn_fwd_tma_64x64_d64", "attn_fwd_tma_128x128_d128")]


SAMPLE = _sample()


def _allocate(module, allocator: str, reuse: int, verify: bool):
    return allocate_module(module, K, allocator=allocator, verify=verify,
                           options=Options(allocator=allocator, knobs={"TupleReuse": reuse}))


@functools.lru_cache(maxsize=None)
def _pair(path, allocator: str):
    """The module, its allocation with the merges (proven) and without them (unproven: only
    its register counts are read); computed once per file and allocator, whichever test
    asks first."""
    module = parse(path.read_text(), str(path))
    on = _allocate(module, allocator, 1, True)
    off = _allocate(parse(path.read_text(), str(path)), allocator, 0, False)
    return module, on, off


@pytest.mark.corpus
@pytest.mark.ptxas
@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("path,arch", SAMPLE, ids=[p.name for p, _ in SAMPLE])
def test_tuple_reuse_is_proven_and_assembles(path, arch, allocator):
    try:
        module, on, _ = _pair(path, allocator)
    except AllocationError as e:
        pytest.skip(f"refused at K = {K}: {e}")
    assert_verified(on)
    assert_chain_proven_and_assembles(module, on, arch)


@pytest.mark.corpus
@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
def test_tuple_reuse_fires_and_costs_no_register_over_the_sample(allocator):
    """Over the whole sample (allocated here where the test above did not run first)."""
    on_total = off_total = fewer = 0
    for path, _ in SAMPLE:
        try:
            _, on, off = _pair(path, allocator)
        except AllocationError:
            continue
        for a, b in zip(on.functions, off.functions):
            on_total += a.registers
            off_total += b.registers
            fewer += a.registers < b.registers
    assert fewer >= 2           # at least the two Triton TMA kernels
    assert on_total < off_total
