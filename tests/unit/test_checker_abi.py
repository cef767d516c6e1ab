"""The checker keeps its own copy of the calling convention (SPEC section 7, seed 003) so that
it shares no code with the allocators (issue 12). These tests tie the copy to the allocators'
:mod:`ptxalloc.target.abi`: the constants, and what each side derives from them for every
budget K = 1..255 (caller- and callee-saved registers, the frame pointer, argument and return
registers), so that a change to one side without the other fails here."""

from __future__ import annotations

import itertools

import pytest

from ptxalloc.target import abi, units
from ptxalloc.verify import bindings, convention, locations

BUDGETS = range(1, 256)


def test_constants_are_target_abi():
    assert convention.ARG_REGS == abi.ARG_REGS
    assert convention.CALLER_SAVED == abi.CALLER_SAVED
    assert convention.CALLEE_SAVED == abi.CALLEE_SAVED
    assert convention.FRAME_POINTER == abi.FRAME_POINTER
    assert convention.UPPER_CALLER_SAVED_FROM == abi.Convention(255).upper_caller_saved.start
    assert bindings.ARG_REGS is convention.ARG_REGS
    assert locations.PRED_REGS == units.PRED_REGS


@pytest.mark.parametrize("k", BUDGETS)
def test_saved_registers_per_budget(k):
    conv = abi.Convention(k)
    assert convention.caller_saved(k) == (*conv.caller_saved, *conv.upper_caller_saved)
    assert convention.callee_saved(k) == tuple(conv.callee_saved)
    assert convention.reserves_frame_pointer(k) == conv.reserves_frame_pointer
    units_of = sum(3 << (2 * r) for r in convention.caller_saved(k))
    assert units_of == conv.caller_saved_units()
    assert sum(3 << (2 * r) for r in convention.callee_saved(k)) == conv.callee_saved_units()


#: argument lists by size in bytes: every list of up to five sizes from 1, 2, 4, 8, 16
SIGNATURES = [list(s) for n in range(6) for s in itertools.product((1, 2, 4, 8, 16), repeat=n)]


@pytest.mark.parametrize("k", (1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 24, 255))
def test_argument_and_return_registers(k):
    conv = abi.Convention(k)
    for sizes in SIGNATURES:
        assert bindings.argument_registers(sizes, k) == abi.assign_arguments(sizes, conv), sizes
    for size in (1, 2, 4, 8, 12, 16):
        assert bindings.return_register_of(size, k) == abi.return_register(size, conv), size


def test_the_checker_imports_nothing_of_the_allocators():
    """No module of ptxalloc/verify imports alloc/, spill/, analysis/ or target/ (the
    checker's independence, SPEC section 9), at the top or inside a function."""
    import ast
    from pathlib import Path

    import ptxalloc.verify
    forbidden = ("alloc", "spill", "analysis", "target")
    found = []
    for path in sorted(Path(ptxalloc.verify.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                package = ["", "ptxalloc.verify", "ptxalloc"][node.level]
                base = ".".join(x for x in (package, node.module) if x)
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "ptxalloc" and len(parts) > 1 and parts[1] in forbidden:
                    found.append(f"{path.name}:{node.lineno}: {name}")
    assert not found, found
