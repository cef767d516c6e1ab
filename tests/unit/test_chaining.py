"""Allocating ptxalloc's own output again (issue 11): the input's ``//@`` comments are an
earlier run's, not this run's annotations, so the output neutralizes them (``// @...``) and
declares its spill array under a name the input does not use (docs/allocated-ptx.md,
"Allocating an allocated file"). Each step is proven against its own input; the original
against the second output is not one allocation step and is refused as such (exit 2)."""

from __future__ import annotations

import re

import pytest

from conftest import DATA
from ptxalloc import ptxas
from ptxalloc.cli import main
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse
from ptxalloc.verify import CheckerInputError, parse_allocated, verify_modules

FILES = [DATA / "pressure_sm80.ptx", DATA / "calls_sm80.ptx"]


def _chain(path, allocator):
    """Run 1 at K = 16, run 2 (on run 1's output) at K = 10: both spill (recomputation without
    chains: with them calls_sm80.ptx fits in 16)."""
    knobs = {"recompute": 1}
    first = allocate(path.read_text(), 16, allocator, filename=str(path), knobs=knobs).ptx
    second = allocate(first, 10, allocator, filename="first.ptx", knobs=knobs).ptx
    return first, second


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_allocating_an_allocated_file(path, allocator, tmp_path, capsys):
    first, second = _chain(path, allocator)          # run 2 verifies itself (allocate)
    assert "//@spill" in first and "//@spill" in second
    # every annotation of the second output is its own: the first run's are plain comments
    assert "// @spill" in second and "// @ptxalloc" in second
    # the second run's spill array is not the first run's
    assert re.search(r"\.local \.align 16 \.b8 __ptxalloc_spill_1\[\d+\];", second)
    # each step proven through the API and the command line
    verify_modules(parse(first, "first.ptx"), parse_allocated(second, "second.ptx"))
    (tmp_path / "first.ptx").write_text(first)
    (tmp_path / "second.ptx").write_text(second)
    assert main(["verify", str(path), str(tmp_path / "first.ptx")]) == 0
    assert main(["verify", str(tmp_path / "first.ptx"), str(tmp_path / "second.ptx")]) == 0
    capsys.readouterr()
    # original against second: two steps, refused with a clear message
    with pytest.raises(CheckerInputError, match="allocation of an earlier run's output"):
        verify_modules(parse(path.read_text(), str(path)), parse_allocated(second, "second.ptx"))
    assert main(["verify", str(path), str(tmp_path / "second.ptx")]) == 2
    assert "verify each step against its own input" in capsys.readouterr().err


@pytest.mark.ptxas
@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
def test_the_second_output_assembles(allocator):
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    for path in FILES:
        _, second = _chain(path, allocator)
        out = ptxas.assemble(second, "sm_80")
        assert out.ok, out.output


def test_a_third_run_is_proven_too():
    first, second = _chain(DATA / "pressure_sm80.ptx", "briggs")
    third = allocate(second, 8, "briggs", filename="second.ptx").ptx
    assert re.search(r"__ptxalloc_spill_2\[\d+\]", third)
    verify_modules(parse(second, "second.ptx"), parse_allocated(third, "third.ptx"))


def test_functions_left_alone_carry_no_earlier_annotations():
    """``--function`` on an allocated file: the functions written back unchanged carry the
    earlier run's comments neutralized, so no header claims them for this run."""
    path = DATA / "pressure_sm80.ptx"
    first = allocate(path.read_text(), 16, filename=str(path)).ptx
    names = [f.name for f in parse(first).functions]
    second = allocate(first, 10, function=names[0], filename="first.ptx").ptx
    assert second.count("//@ptxalloc") == 1
    proofs = verify_modules(parse(first, "first.ptx"), parse_allocated(second, "second.ptx"))
    assert [p.name for p in proofs] == names[:1]
