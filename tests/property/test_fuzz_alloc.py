"""Fuzzing the allocators against the independent checker (issue 5, SPEC section 9).

A hypothesis generator writes random but valid PTX modules (ptxas accepts them): a kernel and
a small ``.func`` it calls with the ``.param`` calling sequence; random CFGs with loops and
irreducible edges (any block may branch to any label, forwards or backwards, guarded or not);
every register class (``.pred``, ``.b16``, ``.b32``/``.f32``, ``.b64``/``.f64``); vector loads
and stores (``ld.global.v2/v4``, ``st.global.v4`` with repeated members); copies; guarded
definitions; values read before any definition; values live across back edges and calls.

Every allocator allocates each example at small budgets (K from 2 to 8) and at K = 255; each
result must be proven by the checker (``allocate`` verifies) and, where ptxas is on the PATH,
assembled by ptxas. An AllocationError is acceptable only when some instruction needs more
registers at once than K has (:func:`registers_needed`, computed here from the ISA table).

CI runs a bounded number of examples; ``bench/fuzz_soak.py`` runs the same property for as
long as asked.
"""

from __future__ import annotations

import importlib.util
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from ptxalloc import ptxas
from ptxalloc.alloc import api
from ptxalloc.errors import AllocationError, VerificationError
from ptxalloc.ir import isa
from ptxalloc.ir.registers import RegClass
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse

# every registered allocator: briggs, fatpoint, ...; the optimal one where its solver is installed
ALLOCATORS = tuple(a for a in api.names()
                   if a != "optimal" or importlib.util.find_spec("ortools") is not None)
SMALL_BUDGETS = range(2, 9)
ARCH = "sm_80"

# register pools: class name -> (declaration type, prefix)
POOLS = {"pred": (".pred", "%p"), "b16": (".b16", "%h"), "b32": (".b32", "%r"),
         "f32": (".f32", "%f"), "b64": (".b64", "%rd"), "f64": (".f64", "%fd")}


class Gen:
    """Builds one function's text from hypothesis draws."""

    def __init__(self, draw, prefix: str, sizes: dict[str, int], calls: bool):
        self.draw = draw
        self.prefix = prefix
        self.sizes = sizes
        self.calls = calls
        self.lines: list[str] = []
        self.ncalls = 0

    def reg(self, cls: str) -> str:
        return f"{POOLS[cls][1]}{self.draw(st.integers(0, self.sizes[cls] - 1))}"

    def regs(self, cls: str, n: int, distinct: bool) -> list[str]:
        if distinct:
            idx = self.draw(st.lists(st.integers(0, self.sizes[cls] - 1), min_size=n,
                                     max_size=n, unique=True))
            return [f"{POOLS[cls][1]}{i}" for i in idx]
        return [self.reg(cls) for _ in range(n)]

    def guard(self) -> str:
        if self.draw(st.integers(0, 4)) == 0:
            return f"@{'!' if self.draw(st.booleans()) else ''}{self.reg('pred')} "
        return ""

    def imm(self) -> int:
        return self.draw(st.integers(-8, 100))

    def instruction(self) -> list[str]:
        d = self.draw
        kind = d(st.sampled_from(
            ["alu32", "alu32", "imm32", "mad", "f32", "cvt", "alu64", "wide", "f64", "alu16",
             "setp", "setp2", "predop", "selp", "copy", "copy", "ld", "st", "ldv2", "ldv4",
             "stv4", "ldv2d", "call"]))
        g = self.guard()
        r = self.reg
        if kind == "alu32":
            op = d(st.sampled_from(["add.s32", "sub.s32", "mul.lo.s32", "and.b32", "xor.b32",
                                    "min.s32", "max.u32"]))
            return [f"{g}{op} {r('b32')}, {r('b32')}, {r('b32')};"]
        if kind == "imm32":
            op = d(st.sampled_from(["add.s32", "shl.b32", "mov.u32"]))
            if op == "mov.u32":
                return [f"{g}mov.u32 {r('b32')}, {self.imm()};"]
            return [f"{g}{op} {r('b32')}, {r('b32')}, {abs(self.imm()) % 31};"]
        if kind == "mad":
            return [f"{g}mad.lo.s32 {r('b32')}, {r('b32')}, {r('b32')}, {r('b32')};"]
        if kind == "f32":
            op = d(st.sampled_from(["add.f32", "mul.f32", "fma.rn.f32", "mov.f32", "neg.f32"]))
            if op == "fma.rn.f32":
                return [f"{g}fma.rn.f32 {r('f32')}, {r('f32')}, {r('f32')}, {r('f32')};"]
            if op == "mov.f32":
                return [f"{g}mov.f32 {r('f32')}, 0f3F800000;"]
            if op == "neg.f32":
                return [f"{g}neg.f32 {r('f32')}, {r('f32')};"]
            return [f"{g}{op} {r('f32')}, {r('f32')}, {r('f32')};"]
        if kind == "cvt":
            op = d(st.sampled_from(["cvt.rn.f32.s32 {f32}, {b32}", "cvt.rzi.s32.f32 {b32}, {f32}",
                                    "cvt.u64.u32 {b64}, {b32}", "cvt.u32.u64 {b32}, {b64}",
                                    "cvt.f64.f32 {f64}, {f32}", "cvt.u32.u16 {b32}, {b16}",
                                    "cvt.u16.u32 {b16}, {b32}", "mov.b32 {f32}, {b32}"]))
            names = re.findall(r"\{(\w+)\}", op)
            return [g + op.format(**{n: r(n) for n in names}) + ";"]
        if kind == "alu64":
            op = d(st.sampled_from(["add.s64", "sub.s64", "and.b64", "mul.lo.s64"]))
            return [f"{g}{op} {r('b64')}, {r('b64')}, {r('b64')};"]
        if kind == "wide":
            return [f"{g}mul.wide.s32 {r('b64')}, {r('b32')}, {r('b32')};"]
        if kind == "f64":
            op = d(st.sampled_from(["add.f64", "mul.f64", "fma.rn.f64", "mov.f64"]))
            if op == "fma.rn.f64":
                return [f"{g}fma.rn.f64 {r('f64')}, {r('f64')}, {r('f64')}, {r('f64')};"]
            if op == "mov.f64":
                return [f"{g}mov.f64 {r('f64')}, 0d3FF0000000000000;"]
            return [f"{g}{op} {r('f64')}, {r('f64')}, {r('f64')};"]
        if kind == "alu16":
            op = d(st.sampled_from(["add.s16", "xor.b16", "mov.b16"]))
            if op == "mov.b16":
                return [f"{g}mov.b16 {r('b16')}, {abs(self.imm())};"]
            return [f"{g}{op} {r('b16')}, {r('b16')}, {r('b16')};"]
        if kind == "setp":
            op = d(st.sampled_from(["setp.lt.s32 {p}, {a}, {b}", "setp.ne.s32 {p}, {a}, 7",
                                    "setp.gt.f32 {p}, {x}, {y}"]))
            return [g + op.format(p=r("pred"), a=r("b32"), b=r("b32"), x=r("f32"),
                                  y=r("f32")) + ";"]
        if kind == "setp2":
            p, q = self.regs("pred", 2, distinct=True) if self.sizes["pred"] > 1 else \
                (r("pred"), "_")
            return [f"{g}setp.ge.s32 {p}|{q}, {r('b32')}, {r('b32')};"]
        if kind == "predop":
            op = d(st.sampled_from(["and.pred", "or.pred", "xor.pred"]))
            if d(st.booleans()):
                return [f"{g}not.pred {r('pred')}, {r('pred')};"]
            return [f"{g}{op} {r('pred')}, {r('pred')}, {r('pred')};"]
        if kind == "selp":
            cls = d(st.sampled_from(["b32", "b64", "f32"]))
            t = {"b32": "b32", "b64": "b64", "f32": "f32"}[cls]
            return [f"{g}selp.{t} {r(cls)}, {r(cls)}, {r(cls)}, {r('pred')};"]
        if kind == "copy":
            cls = d(st.sampled_from(["b32", "b32", "b64", "f32", "f64", "b16", "pred"]))
            t = {"b32": "b32", "b64": "b64", "f32": "f32", "f64": "f64", "b16": "b16",
                 "pred": "pred"}[cls]
            return [f"{g}mov.{t} {r(cls)}, {r(cls)};"]
        off = 16 * d(st.integers(0, 15))
        if kind == "ld":
            cls = d(st.sampled_from(["b32", "f32", "b64", "b16"]))
            t = {"b32": "u32", "f32": "f32", "b64": "u64", "b16": "u16"}[cls]
            return [f"{g}ld.global.{t} {r(cls)}, [%ra0+{off}];"]
        if kind == "st":
            cls = d(st.sampled_from(["b32", "f32", "b64", "b16", "f64"]))
            t = {"b32": "u32", "f32": "f32", "b64": "u64", "b16": "u16", "f64": "f64"}[cls]
            return [f"{g}st.global.{t} [%ra1+{off}], {r(cls)};"]
        if kind == "ldv2" and self.sizes["b32"] >= 2:
            a, b = self.regs("b32", 2, distinct=True)
            return [f"{g}ld.global.v2.u32 {{{a}, {b}}}, [%ra0+{off}];"]
        if kind == "ldv4" and self.sizes["f32"] >= 4:
            v = self.regs("f32", 4, distinct=True)
            return [f"{g}ld.global.v4.f32 {{{', '.join(v)}}}, [%ra0+{off}];"]
        if kind == "stv4":
            v = self.regs("b32", 4, distinct=False)            # repeats allowed in a store
            return [f"{g}st.global.v4.u32 [%ra1+{off}], {{{', '.join(v)}}};"]
        if kind == "ldv2d" and self.sizes["f64"] >= 2:
            a, b = self.regs("f64", 2, distinct=True)
            return [f"{g}ld.global.v2.f64 {{{a}, {b}}}, [%ra0+{off}];"]
        if kind == "call" and self.calls:
            self.ncalls += 1
            n = self.ncalls
            return ["{",
                    f".param .b32 fz_a{n};",
                    f"st.param.b32 [fz_a{n}+0], {r('b32')};",
                    f".param .b64 fz_b{n};",
                    f"st.param.b64 [fz_b{n}+0], {r('b64')};",
                    f".param .b32 fz_r{n};",
                    f"call.uni (fz_r{n}), fz_f, (fz_a{n}, fz_b{n});",
                    f"ld.param.b32 {r('b32')}, [fz_r{n}+0];",
                    "}"]
        return [f"{g}add.s32 {r('b32')}, {r('b32')}, 1;"]

    def body(self, init: list[str], finish: list[str]) -> list[str]:
        d = self.draw
        nblocks = d(st.integers(1, 6))
        out = [f".reg {POOLS[c][0]} {POOLS[c][1]}<{n}>;" for c, n in self.sizes.items()]
        out.append(".reg .b64 %ra<2>;")
        out.extend(init)
        # most registers get a value first; the rest are read before any definition
        for cls, n in self.sizes.items():
            for i in range(n):
                if d(st.integers(0, 5)) == 0:
                    continue
                name = f"{POOLS[cls][1]}{i}"
                out.append({"pred": f"setp.ne.s32 {name}, {i}, 0;",
                            "b16": f"mov.b16 {name}, {i};",
                            "b32": f"mov.u32 {name}, {i};",
                            "f32": f"ld.global.f32 {name}, [%ra0+{4 * i}];",
                            "b64": f"cvt.u64.u32 {name}, {i};",
                            "f64": f"mov.f64 {name}, 0d4000000000000000;"}[cls])
        labels = [f"$L_{self.prefix}{b}" for b in range(nblocks)]
        for b in range(nblocks):
            out.append(f"{labels[b]}:")
            for _ in range(d(st.integers(0, 6))):
                out.extend(self.instruction())
            if b == nblocks - 1:
                break
            end = d(st.sampled_from(["fall", "fall", "bra", "cbra", "cbra", "ret"]))
            target = labels[d(st.integers(0, nblocks - 1))]     # back edges, irreducible ones
            if end == "bra":
                out.append(f"bra.uni {target};")
            elif end == "cbra":
                out.append(f"@{'!' if d(st.booleans()) else ''}{self.reg('pred')} bra {target};")
            elif end == "ret":
                out.append(f"{self.guard()}ret;")
        out.extend(finish)
        out.append("ret;")
        return out


@st.composite
def programs(draw, calls: bool = True) -> str:
    """A random module: ``.func fz_f`` and ``.entry fz_k`` calling it; with ``calls`` False,
    a lone leaf kernel (no calling convention applies)."""
    def sizes():
        return {"pred": draw(st.integers(1, 6)), "b16": draw(st.integers(1, 3)),
                "b32": draw(st.integers(2, 10)), "f32": draw(st.integers(1, 6)),
                "b64": draw(st.integers(1, 5)), "f64": draw(st.integers(1, 4))}
    callee = Gen(draw, "f", sizes(), calls=False)
    f_body = callee.body(
        ["ld.param.u32 %r0, [fz_f_a];", "ld.param.u64 %ra0, [fz_f_b];", "mov.b64 %ra1, %ra0;"],
        ["st.param.b32 [fz_f_r+0], %r1;"])
    kernel = Gen(draw, "k", sizes(), calls=calls)
    k_body = kernel.body(
        ["ld.param.u64 %ra0, [fz_k_in];", "ld.param.u64 %ra1, [fz_k_out];",
         "cvta.to.global.u64 %ra0, %ra0;", "cvta.to.global.u64 %ra1, %ra1;"],
        [f"st.global.u32 [%ra1+{4 * i}], %r{i};" for i in range(kernel.sizes["b32"])]
        + [f"st.global.f64 [%ra1+{512 + 8 * i}], %fd{i};" for i in range(kernel.sizes["f64"])])
    func = [".func (.param .b32 fz_f_r) fz_f(.param .b32 fz_f_a, .param .b64 fz_f_b)", "{"] \
        + ["\t" + s if not s.endswith(":") else s for s in f_body] + ["}", ""]
    return "\n".join(
        [".version 7.0", f".target {ARCH}", ".address_size 64", ""] + (func if calls else [])
        + [".visible .entry fz_k(.param .u64 fz_k_in, .param .u64 fz_k_out)", "{"]
        + ["\t" + s if not s.endswith(":") else s for s in k_body] + ["}", ""])


# --- what a budget must at least hold -------------------------------------------------------

_REGS = {RegClass.H16: 0.5, RegClass.GPR32: 1, RegClass.GPR64: 2, RegClass.B128: 4,
         RegClass.PRED: 0}


def registers_needed(text: str) -> dict[str, tuple[int, str]]:
    """Per function, the most 32-bit registers one instruction needs at once and that
    instruction: its register sources (with the destinations of a guarded instruction, which
    may keep their old values), or its destinations, side by side, where a member of a
    register tuple brings the whole tuple (SPEC section 2: a tuple is one allocation unit whose
    placement spans its members; repeated members and sinks hold a slot too). A budget below
    it cannot be met by any allocator."""
    out = {}
    for fn in parse(text).functions:
        regs = fn.regs

        def size(v):
            return _REGS[regs.classes[v]] * max(1, regs.vec[v])
        # each register's tuple (the widest occurrence it belongs to)
        group: dict[int, tuple[int, float]] = {}
        for ins in fn.instructions():
            for vec, _ in isa.tuple_operands(ins, regs):
                members = [it.v for it in vec.items if type(it).__name__ == "Reg"]
                if len(vec.items) < 2 or not members:
                    continue
                span = max(size(v) for v in members) * len(vec.items)
                for v in members:
                    if v not in group or group[v][1] < span:
                        group[v] = (id(vec), span)
        best = (0, "")
        for ins in fn.instructions():
            before = set(ins.uses) | (set(ins.defs) if ins.guard >= 0 else set())
            for values in (before, set(ins.defs)):
                need = 0.0
                seen = set()
                for v in values:
                    g = group.get(v)
                    if g is None:
                        need += size(v)
                    elif g[0] not in seen:
                        seen.add(g[0])
                        need += g[1]
                need = math.ceil(need)
                if need > best[0]:
                    best = (need, ins.render(regs.names.__getitem__))
        out[fn.name] = best
    return out


def _rename(text: str, tag: str) -> str:
    return re.sub(r"\bfz_", f"fz{tag}_", text)


def check_program(text: str, budgets=None, allocators=ALLOCATORS, assemble: bool = True) -> dict:
    """The fuzz property on one program; returns counts (allocations proven, refusals, ...)."""
    need = registers_needed(text)
    worst = max(n for n, _ in need.values())
    stats = {"proven": 0, "refused": 0, "assembled": 0}
    to_assemble = []
    for allocator in allocators:
        for k in (budgets or list(SMALL_BUDGETS) + [255]):
            try:
                result = allocate(text, k, allocator, arch=ARCH, filename="fuzz.ptx")
            except VerificationError as e:
                raise AssertionError(f"{allocator} at K={k}: {e}\n{text}") from None
            except AllocationError as e:
                assert re.search(r"needs|cannot allocate", str(e)), str(e)
                assert k < worst, (f"{allocator} refused K={k}, but no instruction needs more "
                                   f"than {worst} registers ({need}): {e}\n{text}")
                stats["refused"] += 1
                continue
            assert all(f.verified is True for f in result.functions), text
            stats["proven"] += 1
            to_assemble.append(_rename(result.ptx, f"{allocators.index(allocator)}k{k}"))
    if assemble and to_assemble and ptxas.available():
        # one ptxas run per program: every allocation of it, renamed apart, in one module
        module = _one_module(to_assemble)
        got = ptxas.assemble(module, ARCH)
        assert got.ok, got.output[:2000] + "\n" + text
        stats["assembled"] += len(to_assemble)
    return stats


def _one_module(texts: list[str]) -> str:
    """Modules whose functions have distinct names, as one module."""
    start = re.compile(r"^(?:\.visible\s+)?\.(?:func|entry)\b", re.M)
    head = texts[0][:start.search(texts[0]).start()]
    bodies = []
    for t in texts:
        m = start.search(t)
        bodies.append(t[m.start():])
    return head + "\n".join(bodies)


def run_property(max_examples: int, calls=None, seed=None, stats=None) -> None:
    """Run the property over ``max_examples`` programs (with and without calls unless
    ``calls`` says)."""
    strategy = programs() if calls is None else programs(calls=calls)
    if calls is None:
        strategy = st.booleans().flatmap(lambda c: programs(calls=c))

    @settings(max_examples=max_examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(strategy)
    def prop(text):
        got = check_program(text)
        if stats is not None:
            stats["examples"] = stats.get("examples", 0) + 1
            for k, v in got.items():
                stats[k] = stats.get(k, 0) + v
    if seed is not None:
        prop = hypothesis_seed(seed)(prop)
    prop()


def test_random_programs_allocate_and_verify():
    """40 random programs, each allocated by every allocator at K = 2..8 and 255: proven,
    assembled, refused only where an instruction needs more than K."""
    stats: dict[str, int] = {}
    run_property(40, stats=stats)
    assert stats["examples"] == 40 and stats["proven"] > 0


def test_generated_programs_are_valid_ptx():
    """The generator's output itself assembles (a property only worth stating with ptxas)."""
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    texts = []

    @settings(max_examples=15, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(programs())
    def collect(text):
        texts.append(text)
    collect()
    module = _one_module([_rename(t, str(i)) for i, t in enumerate(texts)])
    got = ptxas.assemble(module, ARCH)
    assert got.ok, got.output[:2000]
