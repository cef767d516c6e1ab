"""Issue 20 on the corpus: a plain ``allocate`` (no ``--registers``) gives every function
ptxas's register limit (target/register_limit.py), never uses more registers than it, and
spills only where MaxLive exceeds the budget or the report names why (the calling convention's
saves around calls, reported under ``convention``). Skipped where ``../shared/corpus`` is
absent."""

from __future__ import annotations

import re

import pytest

from conftest import corpus_params, corpus_root
from ptxalloc.errors import AllocationError
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file
from ptxalloc.target.register_limit import module_limits
from ptxalloc.target.sm import profile_for_module

_DIRECTIVE = re.compile(r"\.(maxnreg|maxntid|reqntid|minnctapersm)\b")


@pytest.mark.corpus
@pytest.mark.parametrize("entry", corpus_params())
def test_default_budget_is_ptxas_limit(entry):
    path = corpus_root() / entry["path"]
    module = parse_file(str(path))
    limits = module_limits(module, profile_for_module(None, module))
    try:
        res = allocate_module(module, verify=False)
    except AllocationError as e:       # an instruction needing more than a launch-bound limit
        pytest.fail(f"refused at ptxas's limit: {e}")
    for fr in res.functions:
        row = fr.report()
        limit = limits[fr.name]
        assert (row["budget"], row["budget_from"]) == (limit.registers, limit.source)
        assert row["registers"] <= row["budget"]
        if row["spill_stores_bytes"] or row["spill_loads_bytes"]:
            # or predicates beyond P0-P6 in slots to use fewer registers (knob PredicateSlots)
            assert row["max_live"]["registers"] > row["budget"] or row.get("convention") or \
                row.get("predicate_slots", {}).get("kept") == "slots", row


@pytest.mark.corpus
def test_default_budget_names_the_launch_bounds():
    root = corpus_root()
    rel = "zluda/ptx/src/test/spirv_run/add_tuning.ptx"      # .maxntid 256,1,1 .minnctapersm 4
    if root is None or not (root / rel).is_file():
        pytest.skip("../shared/corpus is absent")
    text = (root / rel).read_text()
    assert _DIRECTIVE.search(text)
    (row,) = allocate_module(parse_file(str(root / rel))).report()["functions"]
    assert (row["budget"], row["budget_from"]) == (64, ".minnctapersm 4 x .maxntid 256")
