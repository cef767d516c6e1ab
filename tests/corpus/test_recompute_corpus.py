"""Recomputation at the use on the corpus (issue 13): on every 10th corpus file ptxas accepts,
each function's rewriting is proven by the validator and never raises MaxLive, and its
allocation (briggs at K = 32, fat-point at K = 255; the pass is on by default) is proven
through the whole chain from the original file (``verify_modules(original, allocated)``, what
``ptxalloc verify ORIGINAL ALLOCATED`` runs) and assembles with ptxas.

Skipped where ``../shared/corpus`` is absent.
"""

from __future__ import annotations

import functools

import pytest

from conftest import assert_chain_proven_and_assembles, assert_justified_refusal, corpus_files, corpus_root
from ptxalloc.alloc.driver import Options
from ptxalloc.analysis import pressure_of
from ptxalloc.errors import AllocationError
from ptxalloc.passes.recompute import recompute_function
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file
from ptxalloc.verify.recompute import check_recomputation

pytestmark = pytest.mark.corpus


def _params():
    files = corpus_files()[::10]
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/corpus is absent"))]
    return [pytest.param(f, id=f["path"]) for f in files]


@functools.lru_cache(maxsize=None)
def _recomputed(path: str) -> list:
    """(function, its recomputation) for each function of the corpus file ``path`` that the
    pass rewrites; computed once for both tests below."""
    module = parse_file(str(corpus_root() / path))
    return [(fn, r) for fn in module.functions if (r := recompute_function(fn)) is not None]


@pytest.mark.parametrize("entry", _params())
def test_recomputation_proven_and_never_raises_maxlive(entry):
    for fn, r in _recomputed(entry["path"]):
        check_recomputation(fn, r.function)
        before, after = pressure_of(fn), pressure_of(r.function)
        assert after.max_live <= before.max_live and after.max_preds <= before.max_preds


@pytest.mark.ptxas
@pytest.mark.parametrize("allocator,k", [("briggs", 32), ("fatpoint", 255)])
@pytest.mark.parametrize("entry", _params())
def test_recomputed_allocation_proven_from_the_original_and_assembles(entry, allocator, k):
    path = str(corpus_root() / entry["path"])
    module = parse_file(path)
    options = Options(allocator=allocator)
    kept = []
    for fn in module.functions:
        try:
            allocate_module(module, k, allocator, function=fn.name, verify=False,
                            options=options)
            kept.append(fn.name)
        except AllocationError as e:
            assert_justified_refusal(str(e), k)
    module = module.without({f.name for f in module.functions} - set(kept))
    if not kept:
        pytest.skip("every function refused at this budget")
    res = allocate_module(module, k, allocator, options=options)
    assert {f.verified for f in res.functions} == {True}
    assert_chain_proven_and_assembles(module, res, entry["ptxas_arch"])


@pytest.mark.parametrize("entry", _params())
def test_a_changed_constant_in_a_recomputed_chain_is_refuted(entry):
    """The validator refuses every rewriting whose inserted copy computes something else: in
    each function with a recomputation (chains up to four, shared operands' ranges extended),
    the first inserted instruction with an immediate operand gets another immediate, and the
    use reading what it feeds no longer reads the original's value."""
    from ptxalloc.errors import VerificationError
    from ptxalloc.ir.instruction import Instruction
    from ptxalloc.ir.operands import Imm
    mutated = 0
    for fn, r in _recomputed(entry["path"]):
        n = len(fn.regs)
        body = list(r.function.body)
        for k, s in enumerate(body):
            if type(s) is Instruction and s.defs and s.defs[0] >= n \
                    and any(type(op) is Imm for op in s.ops[1:]):
                ops = [Imm(str(int(op.text, 0) + 1)) if type(op) is Imm and
                       op.text.lstrip("-").isdigit() else op for op in s.ops]
                if ops == list(s.ops):
                    continue
                body[k] = s.copy_with(ops)
                break
        else:
            continue
        bad = r.function.copy()
        bad.body = body
        with pytest.raises(VerificationError, match="in place of"):
            check_recomputation(fn, bad)
        mutated += 1
    if not mutated:
        pytest.skip("no recomputed instruction with a decimal immediate to change here")


def test_the_unshared_plan_is_kept_where_it_needs_fewer_registers():
    """rodinia's ``bpnn_layerforward``: the plan with shared extensions and chains of four
    pins operands that chains of three leave free (MaxLive 20 -> 18); the plan without them
    reaches 15, and is the one chosen."""
    root = corpus_root()
    if root is None:
        pytest.skip("../shared/corpus is absent")
    from ptxalloc.ir.recompute import apply_recomputations
    from ptxalloc.passes.recompute import plan
    module = parse_file(str(root / "gpuocelot/tests/ptx/rodinia/backprop_cuda.ptx"))
    fn = next(f for f in module.functions if "bpnn_layerforward" in f.name)
    shared = pressure_of(apply_recomputations(fn, *plan(fn, share=True))).max_live
    alone = pressure_of(apply_recomputations(fn, *plan(fn, share=False))).max_live
    assert (pressure_of(fn).max_live, shared, alone) == (20, 18, 15)
    r = recompute_function(fn)
    assert r is not None and r.max_live_after[0] == 15
    check_recomputation(fn, r.function)
