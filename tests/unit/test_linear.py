"""The allocator contract (issue 12, :mod:`ptxalloc.alloc.api`), the register-unit occupancy
matrix (:mod:`ptxalloc.alloc.matrix`) and the third allocator that proves the contract, linear
scan (:mod:`ptxalloc.alloc.linear`): the registry is what the CLI offers, a Problem reaches no
function or CFG, the driver coalesces only for the allocators that ask, and linear scan
allocates the project's PTX — proven by the checker, assembled by ptxas — spilling the interval
that ends furthest and placing pairs aligned around precolored registers.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import DATA, REPO
from ptxalloc import ptxas
from ptxalloc.alloc import api
from ptxalloc.alloc.api import Coloring, Problem, Program
from ptxalloc.alloc.linear import color as linear_color
from ptxalloc.alloc.matrix import UnitMatrix
from ptxalloc.analysis import FunctionAnalysis, analyze_function
from ptxalloc.errors import AllocationError
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.instruction import Instruction
from ptxalloc.ir.module import Function
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse
from ptxalloc.target.sm import profile_for
from ptxalloc.target.units import GPR32, GPR64, PRED1, RegFile

FILES = sorted(DATA.glob("*.ptx")) + sorted((DATA / "hand").glob("*.ptx")) + [
    REPO / "examples" / "saxpy_poly.ptx"]
#: functions refused at K = 15 whatever the allocator (an instruction needs more)
#: functions refused at K = 15 (a wmma.mma needs more registers at once), by file stem
REFUSED_AT_15 = {"tensor_sm80": {"_Z6k_wmmaPfPK6__halfS2_i"},
                 "tensor_sm90": {"_Z6k_wmmaPfPK6__halfS2_i"}, "sched_wmma": {"wmma2x2"}}


# -- the registry ------------------------------------------------------------------------------

def test_registry_lists_the_three_allocators_and_the_cli_offers_exactly_those():
    assert api.names()[:3] == ["briggs", "fatpoint", "linear"]
    for name in api.names():
        a = api.get(name)
        assert isinstance(a, api.Allocator) and a.name == name and a.description
    assert api.get("briggs").coalesces and api.get("fatpoint").coalesces
    assert not api.get("linear").coalesces
    from ptxalloc.cli import build_parser
    allocate = build_parser()._subparsers._group_actions[0].choices["allocate"]
    choice = next(a for a in allocate._actions if a.dest == "allocator")
    assert list(choice.choices) == api.names()
    with pytest.raises(KeyError):
        api.get("nonesuch")



def test_corpus_wide_runs_leave_the_exact_allocator_out():
    """The corpus tests and the benches take ``api.names(heuristics_only=True)``: the optimal
    allocator (a solver with a time limit per function) is a yardstick for small functions,
    and a corpus-wide run of it took minutes per file."""
    assert api.names()[-1] == "optimal" and getattr(api.get("optimal"), "exact", False)
    assert api.names(heuristics_only=True) == [n for n in api.names() if n != "optimal"]


def test_unknown_allocator_is_a_one_line_error():
    module = parse((REPO / "examples" / "saxpy_poly.ptx").read_text(), "saxpy_poly.ptx")
    with pytest.raises(AllocationError, match="unknown allocator 'nonesuch' .*linear"):
        allocate_module(module, 15, "nonesuch", verify=False)


class _Recorder(api.Allocator):
    """A registered allocator that answers with linear scan and records the problems it saw."""

    description = "test double"

    def __init__(self, name: str, coalesces: bool):
        self.name = name
        self.coalesces = coalesces
        self.merged: list[int] = []

    def color(self, problem: Problem, options) -> Coloring:
        self.merged.append(sum(len(m) - 1 for n, m in problem.members.items()
                               if not problem.is_group[n]))
        return linear_color(problem)


def test_the_driver_coalesces_only_for_allocators_that_ask():
    module = parse((DATA / "loops_sm80.ptx").read_text(), "loops_sm80.ptx")
    with_, without = _Recorder("test-coalescing", True), _Recorder("test-plain", False)
    try:
        api.register(with_)
        api.register(without)
        a = allocate_module(module, 255, "test-coalescing")
        b = allocate_module(module, 255, "test-plain")
    finally:
        api._REGISTRY.pop("test-coalescing", None)
        api._REGISTRY.pop("test-plain", None)
    assert sum(with_.merged) > 0 and sum(without.merged) == 0
    assert {fr.verified for fr in a.functions + b.functions} == {True}


# -- a Problem is plain data ---------------------------------------------------------------------

_PROGRAM_TYPES = (FunctionAnalysis, CFG, Function, Instruction)


def _reachable(obj, seen: set[int], depth: int = 0):
    """Every object reachable from ``obj`` through attributes and containers."""
    if id(obj) in seen or depth > 6 or isinstance(obj, (int, float, str, bool, type(None))):
        return
    seen.add(id(obj))
    yield obj
    if isinstance(obj, dict):
        children = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = list(obj)
    else:
        children = list(getattr(obj, "__dict__", {}).values())
        children += [getattr(obj, s) for s in getattr(type(obj), "__slots__", ())
                     if hasattr(obj, s)]
    for c in children:
        yield from _reachable(c, seen, depth + 1)


def test_problem_reaches_no_function_cfg_or_analysis():
    module = parse((DATA / "calls_sm80.ptx").read_text(), "calls_sm80.ptx")
    fn = module.functions[0]
    p = Problem.from_analysis(analyze_function(fn, profile_for(None, "sm_80")), RegFile(64))
    assert not hasattr(p, "analysis")
    bad = [type(o).__name__ for o in _reachable(p, set()) if isinstance(o, _PROGRAM_TYPES)]
    assert not bad, bad


# -- the occupancy matrix ------------------------------------------------------------------------

def test_unit_matrix_assign_unassign_conflicts_lowest_free():
    shape = [GPR32, GPR64, GPR32, PRED1]
    adj = [0b0110, 0b0101, 0b0011, 0]           # 0-1, 0-2, 1-2 interfere; 3 alone
    m = UnitMatrix(shape, adj, 8)
    m.assign(0, 2)                              # R1: units 2-3
    assert m.units(0) == GPR32.mask(2) == 0b1100
    assert m.conflicts(1, 0) == 0b0001          # a pair over R0:R1 meets node 0
    assert m.conflicts(1, 4) == 0
    assert m.forbidden(1) == 0b1100 and m.forbidden(3) == 0
    placements = RegFile(4).placements(GPR64)
    assert m.lowest_free(placements, m.forbidden(1)) == 4       # R2:R3, aligned
    m.assign(1, 4)
    assert m.forbidden(2) == 0b11111100
    assert m.lowest_free(RegFile(4).placements(GPR32), m.forbidden(2)) == 0
    assert m.unassign(0) == 2 and m.conflicts(1, 0) == 0 and m.assigned == 0b0010
    m.assign(3, 0)                              # a predicate at P0 blocks no register
    assert m.conflicts(2, 0) == 0


# -- linear scan ---------------------------------------------------------------------------------

def _hand_problem(k: int, shapes, edges, points, precolored=None) -> Problem:
    """A Problem over hand-made registers: ``points`` are (defs, uses) per instruction, one
    block, nothing live in or out."""
    n = len(shapes)
    adj = [0] * n
    for a, b in edges:
        adj[a] |= 1 << b
        adj[b] |= 1 << a
    prog = Program([list(d) for d, _ in points], [list(u) for _, u in points],
                   [False] * len(points), [(0, len(points), 0, 0)], [0],
                   [0.0] * len(points), [0] * len(points))
    return Problem(RegFile(k), list(shapes), adj, [1.0] * n, [4] * n, [], [], prog,
                   precolored or {})


def test_linear_scan_spills_the_interval_that_ends_furthest():
    # a = 0..4, b = 1..3, c = 2..3, all live together at 2 and 3; two registers
    points = [([0], []), ([1], []), ([2], []), ([], [1, 2]), ([], [0])]
    p = _hand_problem(2, [GPR32] * 3, [(0, 1), (0, 2), (1, 2)], points)
    assert p.intervals() == {0: (0, 4), 1: (1, 3), 2: (2, 3)}
    c = linear_color(p)
    assert c.spilled == [0]                     # a ends furthest: c takes its register
    assert c.start == {1: 2, 2: 0}
    assert c.stack == [0, 1, 2]


def test_linear_scan_spills_the_current_interval_when_it_ends_furthest():
    # a = 0..3, b = 1..3, c = 2..4
    points = [([0], []), ([1], []), ([2], []), ([], [0, 1]), ([], [2])]
    p = _hand_problem(2, [GPR32] * 3, [(0, 1), (0, 2), (1, 2)], points)
    c = linear_color(p)
    assert c.spilled == [2] and c.start == {0: 0, 1: 2}


def test_linear_scan_places_pairs_aligned_around_precolored_registers():
    # x is bound to R1 (units 2-3); the pair d interferes with it: R0:R1 is taken, R2:R3 wins
    points = [([0], []), ([1], []), ([], [0, 1])]
    p = _hand_problem(4, [GPR32, GPR64], [(0, 1)], points, precolored={0: 2})
    c = linear_color(p)
    assert c.spilled == [] and c.start == {0: 2, 1: 4}


@pytest.mark.parametrize("file,function", [("calls_sm80.ptx", "_Z10k_indirectPfPKfS1_i"),
                                           ("loops_sm80.ptx", "_Z8k_switchPiPKiS1_")])
def test_linear_scan_puts_values_live_across_calls_in_callee_saved_registers(file, function):
    # at K = 64 R24-R30 are callee-saved: nothing needs saving around the calls, as with briggs
    module = parse((DATA / file).read_text(), file)
    for allocator in ("briggs", "linear"):
        fr = allocate_module(module, 64, allocator, function=function).functions[0]
        assert fr.verified and fr.spill_stores_bytes == fr.spill_loads_bytes == 0, allocator


def _params():
    for path in FILES:
        for k in (15, 64, 255):
            yield pytest.param(path, k, id=f"{path.stem}-K{k}")


@pytest.mark.parametrize("path,k", _params())
def test_linear_scan_allocates_the_project_ptx_proven_and_assembled(path, k):
    module = parse(path.read_text(), str(path))
    if k == 15 and path.stem in REFUSED_AT_15:
        refused = REFUSED_AT_15[path.stem]
        for name in refused:
            with pytest.raises(AllocationError, match="needs 24 registers at once"):
                allocate_module(module, k, "linear", function=name)
        module = module.without(refused)
        if not module.functions:
            return
    res = allocate_module(module, k, "linear")
    assert {fr.verified for fr in res.functions} == {True}
    for fr in res.functions:
        assert fr.allocator == "linear" and fr.registers <= k
        assert f"//@ptxalloc allocator=linear budget={k}" in fr.text
    if ptxas.available():
        out = ptxas.assemble(res.ptx, ptxas.arch_for(module.sm))
        assert out.ok, out.output


# -- a plain pytest in a fresh clone --------------------------------------------------------------

def test_pytest_imports_the_package_from_src_without_installation(tmp_path):
    """pyproject's ``pythonpath``: pytest finds ``src/ptxalloc`` of this checkout first, even
    when no package (or another checkout's) is installed."""
    probe = tmp_path / "test_probe.py"
    probe.write_text("import ptxalloc\n\n\ndef test_where():\n"
                     f"    assert ptxalloc.__file__.startswith({str(REPO / 'src')!r}), "
                     "ptxalloc.__file__\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-c", str(REPO / "pyproject.toml"), "--rootdir", str(REPO), str(probe)],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
