"""The independent checker: a proof that an allocated function computes what the original
computes (SPEC section 9, issue 5), in the manner of regalloc2's ``src/checker.rs``.

It reads two functions — the original (virtual registers) and the allocated one as parsed back
from the emitted PTX — and shares no code with the allocators: it uses the parser, the IR and
the ISA table (which operands an instruction defines and uses, which vectors are register
tuples, which registers an asynchronous instruction keeps using), and nothing of ``analysis``,
``alloc``, ``spill`` or ``target``. Its basic blocks (:mod:`.blocks`), its liveness, its
decoding of physical names (:mod:`.locations`) and its reading of the convention's bindings
(:mod:`.bindings`) are its own. docs/checker.md sums it up.

Matching
--------
Every allocated instruction without a ``//@`` annotation must be the next original instruction
— same opcode, same guard sense, same operand structure and non-register text — with each
register operand replaced by a physical location of the right class; a ``//@removed`` comment
line consumes the next original instruction; labels and directives must sit where the original
has them. The rest are inserted instructions (docs/allocated-ptx.md): ``//@spill`` stores,
``//@reload`` loads, ``//@move`` copies, ``//@pspill``/``//@preload`` predicate saves and
restores, ``//@remat`` recomputations, and for the calling convention ``//@save``/``//@restore``
around calls and ``//@csave``/``//@crestore`` of callee-saved registers, each of its one
documented form.

The dataflow
------------
The abstract state maps each location to the set of original values it surely holds. Forward
over the allocated function's CFG, meet = intersection at joins, iterated to a fixpoint; blocks
start "unreached" (top), so every state only shrinks while iterating and any failed check is
already a failure of the fixpoint — the checker stops at the first.

* A definition of value v into location L: v is removed from every location, every value held
  by a location overlapping L is destroyed (units decide), then L holds {v}. A guarded
  definition leaves L holding {v} only if L held v before (when the guard is false the old v
  stays); the other copies of v are stale either way. Several definitions of one instruction
  happen together: two different values written to overlapping locations leave nothing certain.
* A partial definition (a vector component, an operand both read and written like ``wgmma``'s
  accumulator) is a use first.
* Values read before any definition in the original (implicit definitions at entry, SPEC
  section 3; found by the checker's own liveness) are held by every location at entry until it
  is written. An old-ABI ``.reg`` parameter holds its value at entry; at ``ret`` each ``.reg``
  return parameter must hold its value.
* Copies — ``//@move``, ``//@spill``/``//@save`` (register to slot), ``//@reload``/
  ``//@restore`` (slot to register), ``//@pspill`` (``selp.u32 R, 1, 0, P``), ``//@preload``
  (``setp.ne.u32 P, R, 0``), ``//@csave``/``//@crestore`` — give the destination the source's
  whole value set; the source must hold the annotated value where that value is live after the
  copy (copying a dead value is harmless).
* Values dead in the original are dropped from the state at their last use and on entry to a
  block where they are dead: no use can look for them, and the states stay small.
* ``//@remat v``: the instruction must equal v's unique, unguarded definition in the original,
  except for its destination, and that definition must read no register and have no side
  effect (``mov``/``cvta`` of an immediate, a symbol or a per-thread constant special register);
  its destination then holds {v}.
* ``//@removed``: a copy ``mov d, s`` whose two ends are one location that holds s; afterwards
  it holds d as well (d is removed elsewhere). Or the definition of a rematerialized value, of
  the same pure form: afterwards v is held nowhere.
* With ``abi=1`` in the header (the calling convention of SPEC section 7) a ``call`` destroys
  the caller-saved registers (R0-R23, R32 and up), and at each ``ret`` of a ``.func`` every
  callee-saved register (R24-R30) must hold its value at entry; R31, the frame pointer, is
  never allocated. Every ``ld.param``/``st.param`` (and old-ABI call operand) that the
  convention binds uses its bound register (:mod:`.bindings`), and the header must carry
  ``abi=1`` wherever the convention applies (a ``.func``, or a function with a ``call``).
* Asynchronous instructions (``wgmma.mma_async``, ``tcgen05.ld``/``st``; the ISA table's
  ``async_operands``) keep their registers in use until their wait (``wgmma.wait_group 0``,
  ``tcgen05.wait::ld``/``::st``): meanwhile an inserted instruction may not touch those units,
  and no instruction may write them with another value.

Every use must find its value where the allocation put it. Besides, every name must decode to a
legal placement of its value's class inside the budget (predicates in P0-P6), register tuples
(``isa.tuple_operands``) must be consecutive and aligned, spill slots must lie inside the
declared frame, aligned to their width, and be read at the width they were written, and every
physical register must be declared with its family's type. Blocks unreachable from the entry
are matched and checked for placements, but no value reaches them.

Errors name the function, the allocated instruction with its PTX line (and the original line),
the operand, the value expected and what the location holds instead.

A scheduled allocation (``schedule=1`` in the header) is proven against the original with its
instructions in the order its ``//@schedule`` lines record, once :mod:`.schedule` has validated
that order as a dependence-respecting permutation of the original (docs/checker.md).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from ..errors import PtxallocError, VerificationError
from ..ir import isa
from ..ir.instruction import (COMMENT, DEF, DIRECTIVE, USE, Instruction, Label, Raw)
from ..ir.module import Function
from ..ir.operands import Args, Imm, Mem, Neg, Not, Pair, Reg, Sink, Sum, Sym, Vec
from ..util import bits
from .bindings import find_bindings
from .blocks import Blocks
from .schedule import SCHEDULE, scheduled_original
from .locations import (CLASS_BITS, CLASS_FAMILY, FAMILY_TYPE, GPR, SLOT, Locations,
                        NameDecoder, Placement, pow2_at_least)


class CheckerInputError(PtxallocError):
    """The two files cannot be compared at all (no allocation header, functions that do not
    correspond, an unreadable header): exit status 2."""

    exit_code = 2


_ANNOTATION = re.compile(r"//@(spill|reload|remat|move|pspill|preload|save|restore)\s+(\S+)#(\d+)"
                         r"\s*$|//@(csave|crestore)\s+R(\d+)\s*$")
_HEADER = "//@ptxalloc"
_EARLIER_HEADER = "// @ptxalloc"     # an earlier run's header, neutralized (allocated-ptx.md)
_REMOVED = "//@removed"
_SERIALIZE = "//@serialize"

#: Special registers whose value is fixed for the thread's lifetime (PTX ISA chapter 10): a
#: ``mov`` of one can be recomputed anywhere. %clock, %warpid, %smid and the like are not.
_FIXED_SPECIAL = re.compile(
    r"%(?:tid|ntid|ctaid|nctaid|laneid|gridid|nsmid|lanemask_(?:eq|le|lt|ge|gt)|clusterid"
    r"|nclusterid|cluster_ctaid|cluster_nctaid|cluster_ctarank|cluster_nctarank"
    r"|is_explicit_cluster|total_smem_size|aggr_smem_size|dynamic_smem_size)(?:\.[xyzw])?$")

#: The calling convention (SPEC section 7, seed 003): R0-R23 caller-saved, R24-R30
#: callee-saved, R31 the frame pointer; R32 and up caller-saved too (docs/allocated-ptx.md);
#: clipped to the budget.
_CALLER_SAVED = range(0, 24)
_UPPER_CALLER_SAVED_FROM = 32
_CALLEE_SAVED = range(24, 31)
_FRAME_POINTER = 31

# event kinds
_ORIG, _COPY, _REMAT, _RCOPY, _RDEF, _NOP, _WAIT = range(7)

_EMPTY: frozenset = frozenset()


@dataclass
class FunctionProof:
    """What the checker proved about one function."""

    name: str
    kind: str
    allocator: str
    budget: int
    arch: str
    instructions: int = 0           # original instructions
    inserted: dict[str, int] = field(default_factory=dict)
    removed: int = 0
    blocks: int = 0
    block_visits: int = 0
    locations: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        ins = ", ".join(f"{n} {k}" for k, n in sorted(self.inserted.items()) if n) or "nothing"
        what = "kernel" if self.kind == "entry" else "function"
        return (f"verified: {what} '{self.name}' ({self.allocator}, budget {self.budget}, "
                f"{self.arch}): {self.instructions} instructions, inserted {ins}, "
                f"{self.removed} removed; {self.blocks} blocks, {self.block_visits} block visits, "
                f"{self.seconds * 1e3:.1f} ms")


def read_header(fn: Function) -> dict[str, str] | None:
    """The ``//@ptxalloc`` header of an allocated function as key/value pairs, or None when the
    function carries none (it was not allocated)."""
    for s in fn.body:
        if type(s) is Raw and s.kind == COMMENT and s.text.startswith(_HEADER):
            out = {}
            for part in s.text[len(_HEADER):].split():
                k, eq, v = part.partition("=")
                if not eq:
                    raise CheckerInputError(f"function '{fn.name}': malformed allocation header "
                                            f"'{s.text}'")
                out[k] = v
            return out
        if type(s) is Raw and s.kind == COMMENT:
            continue
        return None
    return None


class _State:
    """The abstract state at one program point.

    ``held[L]`` is the set of values location L surely holds; a location absent from ``held``
    is untouched since the entry and holds ``undef`` (the values still implicitly defined at
    entry). Values are dropped from the state once they are dead in the original, so the sets
    stay small. ``pending`` holds the registers of asynchronous instructions not yet waited
    for, as (location, value, wait prefix, line) tuples.
    """

    __slots__ = ("held", "undef", "pending")

    def __init__(self, held, undef, pending):
        self.held = held
        self.undef = undef
        self.pending = pending

    def copy(self) -> "_State":
        return _State(dict(self.held), self.undef, self.pending)

    def same(self, other: "_State") -> bool:
        return (self.undef == other.undef and self.pending == other.pending
                and self.held == other.held)


def _meet(states: list[_State]) -> _State:
    """Intersection of the states reaching a join."""
    if len(states) == 1:
        return states[0].copy()
    first = states[0]
    undef = first.undef
    for s in states[1:]:
        undef = undef & s.undef
    if not undef and not any(s.undef for s in states):
        # absent means empty everywhere: only keys present in every state survive
        held = dict(first.held)
        for s in states[1:]:
            other = s.held
            for loc, a in list(held.items()):
                b = other.get(loc)
                if b is None:
                    del held[loc]
                elif b is not a:
                    k = a & b
                    if k:
                        held[loc] = k
                    else:
                        del held[loc]
    else:
        keys = set()
        for s in states:
            keys.update(s.held)
        held = {}
        for loc in keys:
            acc = None
            for s in states:
                h = s.held.get(loc, s.undef)
                acc = h if acc is None else acc & h
                if not acc:
                    break
            if acc or undef:
                held[loc] = acc
    pending = first.pending
    for s in states[1:]:
        if s.pending != pending:
            pending = pending | s.pending
    return _State(held, undef, pending)


class FunctionChecker:
    """Checks one allocated function against its original."""

    def __init__(self, original: Function, allocated: Function, header: dict[str, str],
                 module_decls: list[str] = ()):
        self.module_decls = list(module_decls)
        self.orig = original
        self.alloc = allocated
        self.header = header
        self.what = "kernel" if original.is_entry else "function"
        try:
            self.budget = int(header.get("budget", ""))
        except ValueError:
            raise CheckerInputError(f"{self.where_fn()}: allocation header without a budget")
        if not 1 <= self.budget <= 255:
            raise CheckerInputError(f"{self.where_fn()}: budget {self.budget} is not 1..255")
        if "stem" not in header:
            raise CheckerInputError(f"{self.where_fn()}: allocation header without a stem")
        self.stem = header["stem"]
        self.spill = header.get("spill") or None
        try:
            self.frame = int(header.get("frame", "0"))
        except ValueError:
            raise CheckerInputError(f"{self.where_fn()}: bad frame size '{header['frame']}'")
        self.abi = header.get("abi") == "1"
        self.scheduled = header.get("schedule") == "1"
        self.decoder = NameDecoder(self.stem, self.budget)
        self.locs = Locations(self.spill)
        self.oregs = original.regs
        self.aregs = allocated.regs
        self.oclass = [c.name for c in self.oregs.classes]
        # what decides a register's legal placements: class and vector arity, as a small code
        codes: dict[tuple, int] = {}
        self.vcode = [codes.setdefault((c, n), len(codes))
                      for c, n in zip(self.oclass, self.oregs.vec)]
        self.gkt: dict[int, tuple] = {}     # original instruction's event -> (gen, kill,
                                            # touched) bitsets of original values
        self._aloc_cache: dict[tuple, int] = {}
        self._adec: dict[int, object] = {}
        self.proof = FunctionProof(original.name, original.kind, header.get("allocator", "?"),
                                   self.budget, header.get("arch", "?"))
        # instruction index -> (allocated instruction or removed text, line, original)
        self.sites: list[tuple] = []
        self.specials: list[str] = []

    # -- messages --

    def where_fn(self) -> str:
        return f"{self.what} '{self.orig.name}'"

    def vname(self, v: int) -> str:
        n = len(self.oregs)
        if v >= n:
            return f"R{v - n}@entry"
        return f"{self.oregs.names[v]}#{v}"

    def site(self, idx: int) -> str:
        ins, line, o = self.sites[idx]
        if type(ins) is str:
            text = ins
        else:
            text = ins.render(self.aregs.names.__getitem__)
            if ins.comment:
                text += " " + ins.comment
        text = " ".join(text.split())
        orig = f" (original line {o.line})" if o is not None and o.line != line else ""
        return f"{self.where_fn()}, line {line} '{text}'{orig}"

    def fail_at(self, idx: int, message: str) -> VerificationError:
        return VerificationError(f"{self.site(idx)}: {message}")

    def show(self, st: _State, loc: int) -> str:
        hs = st.held.get(loc)
        implicit = hs is None
        if implicit:
            hs = st.undef
        if not hs:
            return "nothing"
        names = sorted(self.vname(v) for v in hs)
        if len(names) > 6:
            names = names[:6] + [f"... ({len(hs)} values)"]
        body = "{" + ", ".join(names) + "}"
        return body + (" (values undefined at entry)" if implicit else "")

    def hint(self, st: _State, v: int, loc: int) -> str:
        locs = [self.locs.display[x] for x, hs in st.held.items() if x != loc and v in hs]
        if v in st.undef:
            return ""
        if locs:
            return f"; {self.vname(v)} is in {', '.join(sorted(locs))}"
        return f"; {self.vname(v)} is held nowhere"

    # -- placements --

    def _decode(self, name: str, where: str, idx: int) -> Placement | int:
        p = self.decoder.decode(name)
        if isinstance(p, str):
            raise self.fail_at(idx, f"{where}: {p}")
        if p is None:
            pins = self._pins()
            if name in pins:
                return self.locs.pinned(name)
            raise self.fail_at(idx, f"{where}: '{name}' is not a physical register name")
        return p

    def _pins(self) -> dict[str, int]:
        got = getattr(self, "_pin_names", None)
        if got is None:
            got = {p.name: p.vid for p in self.orig.params + self.orig.returns
                   if p.space == "reg" and p.vid >= 0}
            self._pin_names = got
        return got

    def _check_decl(self, avid: int, p: Placement, where: str, idx: int) -> None:
        """The physical register is declared with its family's type."""
        t = self.aregs.types[avid]
        if p.family == "V":
            ok = t == f".b{p.bits}" and self.aregs.vec[avid] == p.vec
            want = f".v{p.vec} .b{p.bits}"
        else:
            want = FAMILY_TYPE[p.family]
            ok = t == want and self.aregs.vec[avid] == 0
        if not ok:
            raise self.fail_at(idx, f"{where}: {self.aregs.names[avid]} is declared "
                                    f"{t}, not {want}")

    def value_loc(self, avid: int, v: int, comp: str, where: str, idx: int,
                  home_class: str | None = None) -> int:
        """The location of allocated register ``avid`` standing for original value ``v`` (or a
        register of class ``home_class``), checking that it is a legal placement for it."""
        if home_class is not None:
            key = (avid, home_class)
        elif comp:
            key = (avid, v, comp)
        else:
            key = (avid << 12) | self.vcode[v]
        got = self._aloc_cache.get(key)
        if got is not None:
            return got
        name = self.aregs.names[avid]
        dec = self._adec.get(avid)
        if dec is None:
            p = self._decode(name, where, idx)
            if type(p) is not int:
                self._check_decl(avid, p, where, idx)
                if (self.abi and self.budget > _FRAME_POINTER and p.space == GPR
                        and p.start < 2 * _FRAME_POINTER + 2
                        and p.start + p.size > 2 * _FRAME_POINTER):
                    raise self.fail_at(idx, f"{where}: {name} uses R{_FRAME_POINTER}, the frame "
                                            f"pointer under the calling convention (abi=1)")
            dec = self._adec[avid] = p
        p = dec
        if type(p) is int:                       # a pinned register (not cached: depends on v)
            if home_class is None and self._pins().get(name) != v:
                raise self.fail_at(idx, f"{where}: {name} is a pinned .reg parameter, it cannot "
                                        f"hold {self.vname(v)}")
            return p
        if home_class is not None:
            cls, vec = home_class, 0
        else:
            cls, vec = self.oclass[v], self.oregs.vec[v]
        if vec > 1 and not comp:
            ok = p.family == "V" and p.vec == vec and p.bits == max(16, CLASS_BITS[cls])
            need = f"%V{vec}x{max(16, CLASS_BITS[cls])}_<unit>"
        elif vec > 1:                            # a component of a vector register
            ok = p.family == "V"
            need = "a %V vector register"
        else:
            ok = p.family == CLASS_FAMILY[cls]
            need = "%" + CLASS_FAMILY[cls]
        if not ok:
            what = self.vname(v) if home_class is None else f"its {cls} home"
            raise self.fail_at(idx, f"{where}: {name} cannot hold {what}, a {cls}"
                                    f"{f' x{vec}' if vec > 1 else ''} value (needs {need})")
        loc = self.locs.register(p, name)
        self._aloc_cache[key] = loc
        return loc

    def slot_loc(self, mem, width: int, idx: int) -> int:
        if (type(mem) is not Mem or type(mem.base) is not Sym or mem.rest or mem.suffix
                or self.spill is None or mem.base.text != self.spill):
            raise self.fail_at(idx, f"the address is not in the spill array "
                                    f"'{self.spill or '(none declared)'}'")
        off_text = mem.offset.replace(" ", "")
        try:
            off = int(off_text, 0) if off_text else 0
        except ValueError:
            raise self.fail_at(idx, f"spill slot offset '{mem.offset}' is not a number")
        if off < 0 or off + width > self.frame:
            raise self.fail_at(idx, f"spill slot [{self.spill}+{off}] ({width} bytes) is outside "
                                    f"the {self.frame}-byte frame")
        if off % width:
            raise self.fail_at(idx, f"spill slot [{self.spill}+{off}] is not aligned to its "
                                    f"width of {width} bytes")
        return self.locs.slot(off, width)

    # -- the original function --

    def _original_facts(self) -> None:
        orig = self.orig
        self.oinstrs = orig.instructions()
        ndefs: dict[int, list] = {}
        for ins in self.oinstrs:
            for d in ins.defs:
                ndefs.setdefault(d, []).append(ins)
        self.defs_of = ndefs
        self.ret_uses = tuple(p.vid for p in orig.returns if p.space == "reg" and p.vid >= 0)
        self.in_params = tuple(p.vid for p in orig.params if p.space == "reg" and p.vid >= 0)
        # a .func under the calling convention must give its caller back the callee-saved
        # registers as they were: each one's value at entry is a pseudo-value of its own
        n = len(self.oregs)
        self.callee_values: dict[int, int] = {}
        if self.abi and not self.orig.is_entry:
            for r in _CALLEE_SAVED:
                if r < self.budget:
                    self.callee_values[r] = n + r
        self.pseudo = frozenset(self.callee_values.values())
        if not self.abi and (not orig.is_entry or any(o.base == "call" for o in self.oinstrs)):
            why = "it makes a call" if orig.is_entry else "a .func"
            raise VerificationError(f"{self.where_fn()}: the header lacks abi=1, but the "
                                    f"calling convention applies ({why})")
        self.bindings = (find_bindings(orig, self.module_decls, self.budget, self.oclass)
                         if self.abi else {})

    def _liveness(self) -> None:
        """The checker's own backward liveness of the original values, over the allocated CFG
        with each original instruction where the matching placed it (inserted code neither
        reads nor writes original values; a guarded definition does not kill; ``ret`` reads
        old-ABI ``.reg`` return parameters). It finishes the events: the values read before
        any definition (``undef0``: implicit definitions at entry), per block the values dead
        on entry though live out of a predecessor, per original instruction the values that
        die there (dropped from the state: no use can look for them), and per inserted copy
        whether its value is live after it (copying a dead value is harmless)."""
        cfg = self.cfg
        events = self.events
        n = cfg.n
        nvals = len(self.oregs)
        ret_bits = 0
        for v in self.ret_uses:
            ret_bits |= 1 << v
        gkt: list = [None] * len(events)          # (gen, kill, touched) per event
        og = self.gkt
        for i, ev in enumerate(events):
            kind = ev[0]
            if kind == _ORIG:
                gkt[i] = og[i]
            elif kind == _RCOPY:
                g = 1 << ev[4]
                k = 1 << ev[3]
                gkt[i] = (g, k, g | k)
            elif kind == _RDEF:
                k = 1 << ev[2]
                gkt[i] = (0, k, k)
        firsts = cfg.first
        counts = cfg.count
        gen = [0] * n
        kill = [0] * n
        for b in range(n):
            g = k = 0
            for i in range(firsts[b], firsts[b] + counts[b]):
                x = gkt[i]
                if x is not None:
                    g |= x[0] & ~k
                    k |= x[1]
            gen[b] = g
            kill[b] = k
        live_in = [0] * n
        live_out = [0] * n
        succs = cfg.succs
        order = cfg.rpo[::-1] + [b for b in range(n) if not cfg.reachable[b]]
        changed = True
        while changed:
            changed = False
            for b in order:
                out = 0
                for x in succs[b]:
                    out |= live_in[x]
                live_out[b] = out
                new = gen[b] | (out & ~kill[b])
                if new != live_in[b]:
                    live_in[b] = new
                    changed = True
        # per event: the values that die there, and whether an inserted copy's value is live
        dead_of: list = [_EMPTY] * len(events)
        copy_live: list = [True] * len(events)
        for b in range(n):
            live = live_out[b]
            for i in range(firsts[b] + counts[b] - 1, firsts[b] - 1, -1):
                x = gkt[i]
                if x is None:
                    ev = events[i]
                    if ev[0] == _COPY:
                        v = ev[4]
                        copy_live[i] = v >= nvals or bool(live >> v & 1)
                    continue
                gone = x[2] & ~live
                if gone:
                    dead_of[i] = _bitset(gone)
                live = (live & ~x[1]) | x[0]
        self.dead_of = dead_of
        self.copy_live = copy_live
        entry_dead: list = []
        preds = cfg.preds
        for b in range(n):
            out = 0
            for p in preds[b]:
                out |= live_out[p]
            gone = out & ~live_in[b]
            entry_dead.append(_bitset(gone) if gone else _EMPTY)
        self.entry_dead = entry_dead
        live = live_in[0] if n else 0
        for v in self.in_params:
            live &= ~(1 << v)
        self.undef0 = _bitset(live)

    # -- matching and decoding --

    def build(self) -> None:
        """Match the allocated body against the original and decode every instruction into an
        event for the dataflow; builds the allocated CFG."""
        self._original_facts()
        oinstrs = self.oinstrs
        n_orig = len(oinstrs)
        olabels = []
        k = 0
        odirs = []
        for s in self.orig.body:
            t = type(s)
            if t is Instruction:
                k += 1
            elif t is Label:
                olabels.append((s.name, k))
            elif t is Raw and s.kind == DIRECTIVE:
                odirs.append(" ".join(s.text.split()))
        alabels = []
        adirs = []
        events: list[tuple] = []
        syn_body: list = []
        oi = 0
        counts = {"spill": 0, "reload": 0, "remat": 0, "move": 0, "pspill": 0, "preload": 0}
        array_decl = None
        for s in self.alloc.body:
            t = type(s)
            if t is Instruction:
                idx = len(events)
                m = _ANNOTATION.match(s.comment) if s.comment else None
                if m is not None:
                    self.sites.append((s, s.line, None))
                    kind = m.group(1) or m.group(4)
                    if m.group(1):
                        events.append(self._inserted(s, m, idx))
                    else:
                        events.append(self._callee_save(s, kind, int(m.group(5)), idx))
                    counts[kind] = counts.get(kind, 0) + 1
                elif s.comment.strip() == _SERIALIZE:
                    self.sites.append((s, s.line, None))
                    events.append(self._serialize(s, idx))
                    counts["serialize"] = counts.get("serialize", 0) + 1
                else:
                    if s.comment.startswith("//@"):
                        self.sites.append((s, s.line, None))
                        raise self.fail_at(idx, f"unknown or malformed annotation "
                                                f"'{s.comment}'")
                    if oi >= n_orig:
                        self.sites.append((s, s.line, None))
                        raise self.fail_at(idx, "an instruction that is not in the original and "
                                                "carries no //@ annotation")
                    o = oinstrs[oi]
                    oi += 1
                    self.sites.append((s, s.line, o))
                    events.append(self._original(o, s, idx))
                syn_body.append(s)
            elif t is Label:
                alabels.append((s.name, oi))
                syn_body.append(s)
            elif t is Raw:
                if s.kind == COMMENT and s.text.startswith(_REMOVED):
                    idx = len(events)
                    text = s.text
                    if oi >= n_orig:
                        self.sites.append((text, s.line, None))
                        raise self.fail_at(idx, "a removed instruction that is not in the "
                                                "original")
                    o = oinstrs[oi]
                    oi += 1
                    self.sites.append((text, s.line, o))
                    events.append(self._removed(o, text, idx))
                    self.proof.removed += 1
                    syn_body.append(Instruction("ptxalloc.removed", [], line=s.line))
                elif s.kind == DIRECTIVE:
                    text = " ".join(s.text.split())
                    if self.spill is not None and re.match(
                            r"\.local\s.*\b" + re.escape(self.spill) + r"\s*\[", text):
                        array_decl = text
                    else:
                        adirs.append(text)
                elif s.kind == COMMENT and s.text.startswith("//@") and not s.text.startswith(
                        _HEADER) and not (self.scheduled and s.text.startswith(SCHEDULE)):
                    raise VerificationError(f"{self.where_fn()}, line {s.line}: unknown "
                                            f"annotation '{s.text}'")
                elif (s.kind == COMMENT and s.text.startswith(_EARLIER_HEADER)
                      and read_header(self.orig) is None):
                    raise CheckerInputError(
                        f"{self.where_fn()}: the allocated file is the allocation of an earlier "
                        f"run's output (line {s.line} carries that run's header); verify each "
                        f"step against its own input")
        if oi < n_orig:
            o = oinstrs[oi]
            raise VerificationError(
                f"{self.where_fn()}: original line {o.line} "
                f"'{o.render(self.oregs.names.__getitem__)}' is missing from the allocation")
        if alabels != olabels:
            for (a, ka), (b, kb) in zip(alabels, olabels):
                if a != b or ka != kb:
                    raise VerificationError(f"{self.where_fn()}: label '{a}' does not sit where "
                                            f"the original has '{b}'")
            raise VerificationError(f"{self.where_fn()}: the labels differ from the original's")
        if adirs != odirs:
            raise VerificationError(f"{self.where_fn()}: the directives differ from the "
                                    f"original's ({_first_diff(adirs, odirs)})")
        if self.alloc.branch_targets != self.orig.branch_targets:
            raise VerificationError(f"{self.where_fn()}: branch target lists differ")
        if self.spill is not None:
            m = re.match(r"\.local\s+(?:\.align\s+(\d+)\s+)?\.b8\s+" + re.escape(self.spill)
                         + r"\s*\[(\d+)\]\s*;$", array_decl or "")
            if m is None:
                raise VerificationError(f"{self.where_fn()}: the spill array '{self.spill}' is "
                                        f"not declared as '.local .align 16 .b8 "
                                        f"{self.spill}[{self.frame}];'")
            if int(m.group(2)) < self.frame:
                raise VerificationError(f"{self.where_fn()}: the spill array has "
                                        f"{m.group(2)} bytes, less than the frame of "
                                        f"{self.frame}")
            if m.group(1) is None or int(m.group(1)) < 16:
                raise VerificationError(f"{self.where_fn()}: the spill array must be "
                                        f".align 16 (slots are aligned to up to 16 bytes)")
        elif array_decl is not None:
            raise VerificationError(f"{self.where_fn()}: a spill array is declared but the "
                                    f"header names none")
        self.events = events
        self.cfg = cfg = Blocks(syn_body, self.alloc.branch_targets, self.alloc.name,
                                self.alloc.filename)
        self._liveness()
        p = self.proof
        p.instructions = n_orig
        p.inserted = counts
        p.blocks = cfg.n

    def _original(self, o: Instruction, a: Instruction, idx: int) -> tuple:
        """An original instruction: its operands paired with the allocated ones, decoded into
        uses to check and definitions to make."""
        if o.opcode != a.opcode:
            raise self.fail_at(idx, f"expected the original instruction "
                                    f"'{o.render(self.oregs.names.__getitem__)}' here")
        if (o.guard >= 0) != (a.guard >= 0) or o.guard_neg != a.guard_neg:
            raise self.fail_at(idx, "the guard differs from the original's")
        if len(o.ops) != len(a.ops):
            raise self.fail_at(idx, "the operands differ from the original's")
        vecs: dict[int, Vec] = {}
        roles = o.roles
        aops = a.ops
        nroles = len(roles)
        cache = self._aloc_cache
        vcode = self.vcode
        uses = []
        defs = []
        gen = kill = 0
        pairs = None
        for i, x in enumerate(o.ops):
            y = aops[i]
            tx = type(x)
            if tx is Reg:                         # the common cases first
                if type(y) is not Reg or x.comp != y.comp:
                    raise self.fail_at(idx, f"operand {i + 1} differs from the original's "
                                            f"'{x.render(self.oregs.names.__getitem__)}'")
                v = x.v
                loc = cache.get((y.v << 12) | vcode[v]) if not x.comp else None
                if loc is None:
                    loc = self.value_loc(y.v, v, x.comp, f"operand {i + 1}", idx)
                role = roles[i] if i < nroles else USE
                code = i << 6
                if role & DEF:
                    defs.append((loc, v))
                    kill |= 1 << v
                    if x.comp:
                        uses.append((loc, v, code))
                        gen |= 1 << v
                if role & USE:
                    uses.append((loc, v, code))
                    gen |= 1 << v
                continue
            if tx is Imm or tx is Sym:
                if type(y) is tx and x.text == y.text:
                    continue
            else:
                if pairs is None:
                    pairs = []
                if _pair(x, y, USE if tx is Mem else (roles[i] if i < nroles else USE), i, -1,
                         pairs, vecs):
                    continue
            raise self.fail_at(idx, f"operand {i + 1} differs from the original's "
                                    f"'{x.render(self.oregs.names.__getitem__)}'")
        if pairs:
            for x, y, role, i, member in pairs:
                v = x.v
                comp = x.comp
                loc = cache.get((y.v << 12) | vcode[v]) if not comp else None
                if loc is None:
                    where = f"operand {i + 1}" + (f" member {member + 1}" if member >= 0 else "")
                    loc = self.value_loc(y.v, v, comp, where, idx)
                code = (i << 6) | (member + 1)
                if role & DEF:
                    defs.append((loc, v))
                    kill |= 1 << v
                    if comp:
                        uses.append((loc, v, code))
                        gen |= 1 << v
                if role & USE:
                    uses.append((loc, v, code))
                    gen |= 1 << v
        if o.guard >= 0:
            loc = self.value_loc(a.guard, o.guard, "", "guard", idx)
            uses.append((loc, o.guard, -1))
            gen |= 1 << o.guard
            self.gkt[idx] = (gen, 0, gen | kill)        # a guarded definition does not kill
        else:
            self.gkt[idx] = (gen, kill, gen | kill)
        if vecs:
            for vec, align in isa.tuple_operands(o, self.oregs):
                self._check_tuple(vec, vecs.get(id(vec)), align, idx)
        clobber = ()
        asyn = None
        wait_clear = None
        opc = o.opcode
        if opc[0] in "rctw":
            base = opc.partition(".")[0]
            if base == "ret" and (self.ret_uses or self.callee_values):
                for v in self.ret_uses:
                    uses.append((self.locs.pinned(self.oregs.names[v]), v,
                                 self._special(f"return parameter {self.oregs.names[v]}")))
                    gen |= 1 << v
                for r, e in self.callee_values.items():
                    uses.append((self._reg_loc(r), e,
                                 self._special(f"callee-saved R{r} (its value at entry)")))
                k0 = self.gkt[idx][1]
                self.gkt[idx] = (gen, k0, gen | k0)
            elif base == "call" and self.abi:
                clobber = tuple(self._reg_loc(r) for r in (*_CALLER_SAVED, *range(
                    _UPPER_CALLER_SAVED_FROM, self.budget)) if r < self.budget)
            elif base in ("wgmma", "tcgen05"):
                got = isa.async_operands(o)
                if got is not None:
                    values, wait = got
                    # every operand register the instruction keeps accessing, whether a
                    # vector member or a plain register (tcgen05.ld.red's redval)
                    accessed = dict.fromkeys((loc, v) for loc, v in defs if v in values)
                    accessed.update(((loc, v), None) for loc, v, _ in uses if v in values)
                    asyn = (tuple(accessed), wait, base + "." + opc.split(".")[1])
                if opc.startswith("wgmma.wait_group"):
                    if o.ops and type(o.ops[0]) is Imm and o.ops[0].text.strip() == "0":
                        wait_clear = "wgmma.wait_group"
                elif opc.startswith(("tcgen05.wait::ld", "tcgen05.wait::st")):
                    wait_clear = opc[:len("tcgen05.wait::ld")]
        if self.bindings:
            bound = self.bindings.get(id(o))
            if bound is not None:
                self._check_bindings(bound, o, a, idx)
        return (_ORIG, idx, tuple(uses), tuple(defs), o.guard >= 0, clobber, asyn, wait_clear,
                opc)

    def _check_bindings(self, bound, o: Instruction, a: Instruction, idx: int) -> None:
        """Each register operand the calling convention binds (:mod:`.bindings`) is the bound
        register itself."""
        for b in bound:
            i, j = b.path
            x = o.ops[i] if j < 0 else o.ops[i].items[j]
            y = a.ops[i] if j < 0 else a.ops[i].items[j]
            name = self.aregs.names[y.v]
            p = self._adec.get(y.v)
            if p is None:
                p = self._decode(name, f"operand {i + 1}", idx)
            if type(p) is int or p.space != GPR or p.start != 2 * b.reg:
                where = f"operand {i + 1}" + (f" member {j + 1}" if j >= 0 else "")
                want = b.wanted(self.stem, self.oclass[x.v], self.oregs.vec[x.v])
                raise self.fail_at(idx, f"{where}: {name} breaks the calling convention's "
                                        f"binding (abi=1, budget {self.budget}): {b.what} "
                                        f"must be in {want}")

    def _check_tuple(self, vec: Vec, avec: Vec | None, align: int, idx: int) -> None:
        """Members of a register tuple sit in consecutive units from an aligned start."""
        if avec is None or len(vec.items) < 2:
            return
        sizes = []
        for it in vec.items:
            if type(it) is Reg and not it.comp:
                v = it.v
                u = max(1, CLASS_BITS[self.oclass[v]] // 16) * max(1, self.oregs.vec[v])
                sizes.append(u)
            else:
                sizes.append(None)
        known = [s for s in sizes if s is not None]
        if not known or self.oclass[next(it.v for it in vec.items
                                         if type(it) is Reg)] == "PRED":
            return
        fill = max(known)
        off = 0
        starts = []
        for j, (it, ait, s) in enumerate(zip(vec.items, avec.items, sizes)):
            s = fill if s is None else s
            if type(ait) is Reg and not ait.comp and type(it) is Reg:
                p = self.decoder.decode(self.aregs.names[ait.v])
                if isinstance(p, Placement) and p.space == GPR:
                    starts.append((j, p.start - off, self.aregs.names[ait.v]))
            off += s
        total = off
        if not starts:
            return
        names = "{" + ", ".join(it.render(self.aregs.names.__getitem__) for it in avec.items) + "}"
        base = starts[0][1]
        for j, b, name in starts[1:]:
            if b != base:
                raise self.fail_at(idx, f"register tuple {names} is not consecutive: member "
                                        f"{j + 1} {name} is out of place")
        al = max(1, min(2 * align, pow2_at_least(total)))
        if base < 0 or base % al:
            raise self.fail_at(idx, f"register tuple {names} is not aligned to "
                                    f"{al // 2 if al >= 2 else 0.5:g} register(s)")
        if base + total > 2 * self.budget:
            raise self.fail_at(idx, f"register tuple {names} runs past the budget of "
                                    f"{self.budget} registers")

    def _special(self, text: str) -> int:
        """A code naming a use that is no operand (for messages)."""
        self.specials.append(text)
        return -1 - len(self.specials)

    def _desc(self, code: int) -> str:
        """The operand a use code names: ``i << 6 | member + 1``, -1 the guard, below that a
        special use."""
        if code == -1:
            return "guard"
        if code < -1:
            return self.specials[-2 - code]
        i, member = code >> 6, (code & 63) - 1
        return f"operand {i + 1}" + (f" member {member + 1}" if member >= 0 else "")

    def _reg_loc(self, r: int) -> int:
        return self.locs.register(Placement("R", r, GPR, 2 * r, 2), f"%{self.stem}R{r}")

    def _serialize(self, a: Instruction, idx: int) -> tuple:
        """``//@serialize``: an inserted ``wgmma.wait_group.sync.aligned 0`` (the allocator
        serialized the wgmma groups, :mod:`ptxalloc.alloc.serialize_wgmma`). Waiting earlier
        only shortens the asynchrony: it reads and writes no register, and retires the
        in-flight wgmma registers as an original ``wait_group 0`` does."""
        ops = a.ops
        if (a.guard >= 0 or a.opcode != "wgmma.wait_group.sync.aligned" or len(ops) != 1
                or type(ops[0]) is not Imm or ops[0].text.strip() != "0"):
            raise self.fail_at(idx, "a //@serialize instruction must be an unguarded "
                                    "'wgmma.wait_group.sync.aligned 0'")
        return (_WAIT, idx)

    def _callee_save(self, a: Instruction, kind: str, r: int, idx: int) -> tuple:
        """``//@csave Rn`` stores callee-saved Rn's entry value in the prologue of a ``.func``;
        ``//@crestore Rn`` puts it back before a ``ret``."""
        e = self.callee_values.get(r)
        if e is None:
            raise self.fail_at(idx, f"R{r} is not a callee-saved register of this function "
                                    f"(budget {self.budget}{'' if self.abi else ', no abi=1'})")
        ops = a.ops
        prefix = "st.local." if kind == "csave" else "ld.local."
        if (a.guard >= 0 or not a.opcode.startswith(prefix) or len(ops) != 2
                or _type_bits(a.opcode[len(prefix):]) != 32):
            raise self.fail_at(idx, f"a {kind} of R{r} must be '{prefix}b32' with two operands")
        mem, reg = (ops[0], ops[1]) if kind == "csave" else (ops[1], ops[0])
        if type(reg) is not Reg or reg.comp or self.aregs.names[reg.v] != f"%{self.stem}R{r}":
            raise self.fail_at(idx, f"a {kind} of R{r} must move %{self.stem}R{r}")
        p = self._decode(self.aregs.names[reg.v], "register", idx)
        self._check_decl(reg.v, p, "register", idx)
        rloc = self._reg_loc(r)
        slot = self.slot_loc(mem, 4, idx)
        if kind == "csave":
            return (_COPY, idx, rloc, slot, e, f"callee-saved R{r} save")
        return (_COPY, idx, slot, rloc, e, f"callee-saved R{r} restore")

    def _value_of(self, m: re.Match, idx: int) -> int:
        name, vid = m.group(2), int(m.group(3))
        if vid >= len(self.oregs) or self.oregs.names[vid] != name:
            raise self.fail_at(idx, f"the annotation names {name}#{vid}, which is not a register "
                                    f"of the original function")
        return vid

    def _inserted(self, a: Instruction, m: re.Match, idx: int) -> tuple:
        """An inserted instruction, checked for its documented form."""
        kind = m.group(1)
        v = self._value_of(m, idx)
        if a.guard >= 0:
            raise self.fail_at(idx, f"an inserted {kind} may not be guarded")
        cls = self.oclass[v]
        vec = self.oregs.vec[v]
        ops = a.ops
        opc = a.opcode
        home = None
        if cls == "PRED" and kind in ("spill", "reload", "save", "restore", "move") and not (
                kind == "move" and opc == "mov.pred"):
            # a predicate saved in its 32-bit home register (//@pspill) travels as that
            # register: spilled, reloaded or copied as a .b32 holding 0 or 1
            home = "GPR32"
        width_bits = CLASS_BITS[home or cls] * max(1, vec) if (home or cls) != "PRED" else 0
        if kind in ("spill", "reload", "save", "restore"):
            prefix = "st.local." if kind in ("spill", "save") else "ld.local."
            if not opc.startswith(prefix) or _type_bits(opc[len(prefix):]) != width_bits \
                    or len(ops) != 2:
                raise self.fail_at(idx, f"a {kind} of {self.vname(v)} must be "
                                        f"'{prefix}b{width_bits}' with two operands")
            store = kind in ("spill", "save")
            mem, reg = (ops[0], ops[1]) if store else (ops[1], ops[0])
            if type(reg) is not Reg or reg.comp:
                raise self.fail_at(idx, f"the {kind}ed register is not a plain register")
            slot = self.slot_loc(mem, width_bits // 8, idx)
            rloc = self.value_loc(reg.v, v, "", "register", idx, home)
            what = {"spill": "spill store", "reload": "reload", "save": "save before a call",
                    "restore": "restore after a call"}[kind]
            if store:
                return (_COPY, idx, rloc, slot, v, what)
            return (_COPY, idx, slot, rloc, v, what)
        if kind == "move":
            if (len(ops) != 2 or not opc.startswith("mov.") or any(
                    type(op) is not Reg or op.comp for op in ops)
                    or (width_bits == 0) != (opc == "mov.pred")
                    or (width_bits and _type_bits(opc[4:]) != width_bits)):
                raise self.fail_at(idx, f"a move of {self.vname(v)} must be "
                                        f"'mov.{f'b{width_bits}' if width_bits else 'pred'} "
                                        f"dst, src'")
            dst = self.value_loc(ops[0].v, v, "", "destination", idx, home)
            src = self.value_loc(ops[1].v, v, "", "source", idx, home)
            return (_COPY, idx, src, dst, v, "move")
        if kind in ("pspill", "preload"):
            if cls != "PRED":
                raise self.fail_at(idx, f"{kind} of {self.vname(v)}, which is not a predicate")
            if kind == "pspill":
                ok = (opc in ("selp.u32", "selp.b32", "selp.s32") and len(ops) == 4
                      and type(ops[0]) is Reg and not ops[0].comp and type(ops[3]) is Reg
                      and _imm(ops[1]) == 1 and _imm(ops[2]) == 0)
                form = "selp.u32 R, 1, 0, P"
            else:
                ok = (opc in ("setp.ne.u32", "setp.ne.b32", "setp.ne.s32") and len(ops) == 3
                      and type(ops[0]) is Reg and not ops[0].comp and type(ops[1]) is Reg
                      and not ops[1].comp and _imm(ops[2]) == 0)
                form = "setp.ne.u32 P, R, 0"
            if not ok:
                raise self.fail_at(idx, f"a {kind} must read '{form}'")
            if kind == "pspill":
                home = self.value_loc(ops[0].v, v, "", "home register", idx, "GPR32")
                pred = self.value_loc(ops[3].v, v, "", "predicate", idx)
                return (_COPY, idx, pred, home, v, "predicate save")
            pred = self.value_loc(ops[0].v, v, "", "predicate", idx)
            home = self.value_loc(ops[1].v, v, "", "home register", idx, "GPR32")
            return (_COPY, idx, home, pred, v, "predicate restore")
        # remat
        d = self.defs_of.get(v, [])
        if len(d) != 1:
            raise self.fail_at(idx, f"{self.vname(v)} has {len(d)} definitions in the original; "
                                    f"only a value with one can be rematerialized")
        o = d[0]
        why = _impure(o)
        if why:
            raise self.fail_at(idx, f"{self.vname(v)} cannot be rematerialized: its definition "
                                    f"(original line {o.line}) {why}")
        if (a.opcode != o.opcode or len(a.ops) != len(o.ops) or type(a.ops[0]) is not Reg
                or a.ops[0].comp or any(not _same_text(x, y) for x, y in zip(o.ops[1:],
                                                                              a.ops[1:]))):
            raise self.fail_at(idx, f"a rematerialization of {self.vname(v)} must repeat its "
                                    f"definition '{o.render(self.oregs.names.__getitem__)}' "
                                    f"(original line {o.line}) with another destination")
        dst = self.value_loc(a.ops[0].v, v, "", "destination", idx)
        return (_REMAT, idx, dst, v)

    def _removed(self, o: Instruction, text: str, idx: int) -> tuple:
        body = text[len(_REMOVED):].strip()
        names = _match_rendering(o, body)
        if names is None:
            raise self.fail_at(idx, f"the removed instruction is not the original "
                                    f"'{o.render(self.oregs.names.__getitem__)}'")
        if o.is_copy and o.guard < 0:
            d, s = o.ops[0].v, o.ops[1].v
            (vd, nd), (vs, ns) = names[0], names[1]
            if nd != ns:
                raise self.fail_at(idx, f"a removed copy must have both ends in one register, "
                                        f"not {nd} and {ns}")
            p = self._decode(nd, "the copy", idx)
            if type(p) is int:
                loc = p
            else:
                cls = self.oclass[d]
                if p.family != CLASS_FAMILY[cls] and not (p.family == "V"
                                                          and self.oregs.vec[d] > 1):
                    raise self.fail_at(idx, f"{nd} cannot hold {self.vname(d)}, a {cls} value")
                loc = self.locs.register(p, nd)
            return (_RCOPY, idx, loc, d, s)
        why = _impure(o)
        if why:
            raise self.fail_at(idx, f"only a redundant copy or the definition of a "
                                    f"rematerialized value may be removed; this one {why}")
        return (_RDEF, idx, o.ops[0].v)

    # -- the dataflow --

    def run(self) -> FunctionProof:
        t0 = time.perf_counter()
        self.build()
        self._dataflow()
        self.proof.locations = len(self.locs)
        self.proof.seconds = time.perf_counter() - t0
        return self.proof

    def _entry_state(self) -> _State:
        held: dict[int, frozenset] = {}
        undef = self.undef0
        for v in self.in_params:
            held[self.locs.pinned(self.oregs.names[v])] = frozenset((v,))
        for r, e in self.callee_values.items():
            held[self._reg_loc(r)] = undef | {e}
        return _State(held, undef, frozenset())

    def _dataflow(self) -> None:
        cfg = self.cfg
        n = cfg.n
        events = self.events
        block_events = [events[f:f + c] for f, c in zip(cfg.first, cfg.count)]
        out: list[_State | None] = [None] * n
        entry0 = self._entry_state()
        rpo = cfg.rpo
        dirty = [False] * n
        dirty[0] = True
        preds = cfg.preds
        succs = cfg.succs
        visits = 0
        limit = 50 * n + 1000
        entry_dead = self.entry_dead
        pending = True
        while pending:
            pending = False
            for b in rpo:
                if not dirty[b]:
                    continue
                dirty[b] = False
                ins = [out[p] for p in preds[b] if out[p] is not None]
                if b == 0:
                    ins.append(entry0)
                st = _meet(ins)
                if entry_dead[b]:
                    self._kill_set(st, entry_dead[b])
                visits += 1
                if visits > limit:
                    raise VerificationError(f"{self.where_fn()}: the checker's dataflow did not "
                                            f"converge (internal error)")
                self._transfer(st, block_events[b])
                old = out[b]
                if old is None or not old.same(st):
                    out[b] = st
                    for s in succs[b]:
                        dirty[s] = True
                        pending = True
        self.proof.block_visits = visits

    def _transfer(self, st: _State, evs: list[tuple]) -> None:
        held = st.held
        dead_of = self.dead_of
        copy_live = self.copy_live
        for ev in evs:
            kind = ev[0]
            if kind == _ORIG:
                _, idx, uses, defs, guarded, clobber, asyn, wait_clear, opcode = ev
                dead = dead_of[idx]
                undef = st.undef
                for loc, v, k in uses:
                    hs = held.get(loc)
                    if hs is None:
                        hs = undef
                    if v not in hs:
                        self._use_error(st, idx, loc, v, self._desc(k))
                if st.pending:
                    self._check_pending(st, idx, defs, asyn, opcode, False)
                if wait_clear is not None and st.pending:
                    st.pending = frozenset(p for p in st.pending if p[2] != wait_clear)
                if clobber:
                    for loc in clobber:
                        self._write(st, loc, _EMPTY)
                if defs:
                    if guarded or len(defs) > 1:
                        self._multi_def(st, defs, guarded, dead)
                    else:
                        loc, v = defs[0]
                        self._kill_set(st, dead | {v} if dead else frozenset((v,)))
                        self._write(st, loc, _EMPTY if v in dead else frozenset((v,)))
                elif dead:
                    self._kill_set(st, dead)
                if asyn is not None:
                    alocs, wait, _ = asyn
                    line = self.sites[idx][1]
                    st.pending = st.pending | frozenset((loc, v, wait, line) for loc, v in alocs)
            elif kind == _COPY:
                _, idx, src, dst, v, what = ev
                hs = held.get(src)
                if hs is None:
                    hs = st.undef
                if v not in hs and copy_live[idx]:
                    self._copy_error(st, idx, src, v, what)
                if st.pending:
                    self._check_pending(st, idx, ((dst, v),), None, "", True, src)
                self._write(st, dst, hs)
            elif kind == _WAIT:
                if st.pending:
                    st.pending = frozenset(p for p in st.pending if p[2] != "wgmma.wait_group")
            elif kind == _REMAT:
                _, idx, dst, v = ev
                if st.pending:
                    self._check_pending(st, idx, ((dst, v),), None, "", True)
                self._write(st, dst, frozenset((v,)))
            elif kind == _RCOPY:
                _, idx, loc, d, s = ev
                dead = dead_of[idx]
                hs = held.get(loc)
                if hs is None:
                    hs = st.undef
                if s not in hs:
                    self._use_error(st, idx, loc, s, "the removed copy's source")
                if d != s:
                    self._kill_value(st, d)
                    hs = held.get(loc)
                    if hs is None:
                        hs = st.undef
                    held[loc] = hs | {d}
                if dead:
                    self._kill_set(st, dead)
            elif kind == _RDEF:
                self._kill_set(st, dead_of[ev[1]] | {ev[2]})

    # state updates

    def _kill_value(self, st: _State, v: int) -> None:
        """v is redefined, or dead: no location holds it any more."""
        held = st.held
        empty = None
        for loc, hs in held.items():
            if v in hs:
                rest = hs - {v}
                if rest or st.undef:
                    held[loc] = rest
                elif empty is None:
                    empty = [loc]
                else:
                    empty.append(loc)
        if empty is not None:
            for loc in empty:
                del held[loc]
        if v in st.undef:
            # untouched locations held the undefined v: no more
            st.undef = st.undef - {v}

    def _kill_set(self, st: _State, ks: frozenset) -> None:
        """Every value of ``ks`` is redefined or dead: no location holds it any more."""
        held = st.held
        undef = st.undef
        apart = ks.isdisjoint
        hits = [loc for loc, hs in held.items() if not apart(hs)]
        for loc in hits:
            rest = held[loc] - ks
            if rest or undef:
                held[loc] = rest
            else:
                del held[loc]
        if undef and not apart(undef):
            st.undef = undef - ks

    def _write(self, st: _State, loc: int, values: frozenset) -> None:
        """Location ``loc`` now holds ``values``; whatever any overlapping location held is
        destroyed."""
        held = st.held
        if st.undef:
            for o in self.locs.overlaps[loc]:
                held[o] = _EMPTY
        else:
            for o in self.locs.overlaps[loc]:
                held.pop(o, None)
        if values:
            held[loc] = values

    def _multi_def(self, st: _State, defs, guarded: bool, dead: frozenset) -> None:
        """Several definitions, or a guarded one: a guarded definition leaves its location
        holding v only if it held v before."""
        held = st.held
        undef = st.undef
        new: dict[int, frozenset] = {}
        for loc, v in defs:
            vals = _EMPTY if v in dead else frozenset((v,))
            if guarded:
                hs = held.get(loc)
                if hs is None:
                    hs = undef
                keep = v in hs
            else:
                keep = True
            got = new.get(loc)
            val = vals if keep else _EMPTY
            new[loc] = val if got is None else (got & val)
        # two different values into overlapping locations: nothing certain in either
        locs = list(new)
        for i, a in enumerate(locs):
            ov = self.locs.overlaps[a]
            for b in locs[i + 1:]:
                if b in ov:
                    new[a] = _EMPTY
                    new[b] = _EMPTY
        self._kill_set(st, dead.union(d[1] for d in defs))
        for loc in locs:
            self._write(st, loc, _EMPTY)
        for loc, vals in new.items():
            if vals:
                self._write(st, loc, vals)

    def _check_pending(self, st: _State, idx: int, defs, asyn, opcode: str, inserted: bool,
                       src: int | None = None) -> None:
        """Registers of asynchronous instructions in flight: no other value may be written
        there, and inserted code may not touch them."""
        overlaps = self.locs.overlaps
        same_family = None
        if asyn is not None:
            same_family = asyn[2]
        for ploc, pv, wait, line in st.pending:
            ov = overlaps[ploc]
            if inserted and src is not None and src in ov:
                raise self.fail_at(idx, f"reads {self.locs.display[src]} while the asynchronous "
                                        f"instruction of line {line} still uses "
                                        f"{self.locs.display[ploc]} (until {wait})")
            for d in defs:
                loc, v = d[0], d[1]
                if loc in ov:
                    if not inserted and (v == pv or (same_family is not None
                                                     and opcode.startswith(same_family))):
                        continue
                    raise self.fail_at(idx, f"writes {self.locs.display[loc]} while the "
                                            f"asynchronous instruction of line {line} still "
                                            f"uses {self.locs.display[ploc]} for "
                                            f"{self.vname(pv)} (until {wait})")

    # errors

    def _use_error(self, st: _State, idx: int, loc: int, v: int, desc: str) -> None:
        name = self.locs.display[loc]
        raise self.fail_at(idx, f"{desc} should hold {self.vname(v)} but {name} holds "
                                f"{self.show(st, loc)}{self.hint(st, v, loc)}")

    def _copy_error(self, st: _State, idx: int, src: int, v: int, what: str) -> None:
        name = self.locs.display[src]
        extra = ""
        if self.locs.space(src) == SLOT:
            for o in self.locs.overlaps[src]:
                if o != src and v in st.held.get(o, ()):
                    extra = (f" (it was written at another width: {self.locs.display[o]} "
                             f"holds it)")
                    break
        raise self.fail_at(idx, f"{what} of {self.vname(v)} reads {name}, which holds "
                                f"{self.show(st, src)}{extra}{self.hint(st, v, src)}")


def _bitset(x: int) -> frozenset:
    return frozenset(bits(x))


def _first_diff(a: list, b: list) -> str:
    for x, y in zip(a, b):
        if x != y:
            return f"'{x}' where the original has '{y}'"
    if len(a) > len(b):
        return f"extra '{a[len(b)]}'"
    return f"'{b[len(a)]}' is missing"


def _pair(x, y, role: int, i: int, member: int, out: list, vecs: dict) -> bool:
    """Whether allocated operand ``y`` has the structure and text of original ``x`` with
    registers replaced; collects (original reg, allocated reg, role, operand, member)."""
    tx = type(x)
    if tx is not type(y):
        return False
    if tx is Reg:
        if x.comp != y.comp:
            return False
        out.append((x, y, role, i, member))
        return True
    if tx is Imm or tx is Sym:
        return x.text == y.text
    if tx is Sink:
        return True
    if tx is Vec or tx is Args:
        if len(x.items) != len(y.items):
            return False
        if tx is Vec:
            vecs[id(x)] = y
        for j, (a, b) in enumerate(zip(x.items, y.items)):
            if not _pair(a, b, role, i, j, out, vecs):
                return False
        return True
    if tx is Mem:
        if x.offset != y.offset or x.suffix != y.suffix or len(x.rest) != len(y.rest):
            return False
        if (x.base is None) != (y.base is None):
            return False
        if x.base is not None and not _pair(x.base, y.base, USE, i, member, out, vecs):
            return False
        for a, b in zip(x.rest, y.rest):
            if not _pair(a, b, USE, i, member, out, vecs):
                return False
        return True
    if tx is Pair:
        return (_pair(x.a, y.a, role, i, 0, out, vecs)
                and _pair(x.b, y.b, role, i, 1, out, vecs))
    if tx is Not or tx is Neg:
        return _pair(x.reg, y.reg, role, i, member, out, vecs)
    if tx is Sum:
        return x.offset == y.offset and _pair(x.reg, y.reg, role, i, member, out, vecs)
    return False


def _same_text(x, y) -> bool:
    """Equal operands that hold no register."""
    if any(True for _ in x.regs()) or any(True for _ in y.regs()):
        return False
    return x.render(str) == y.render(str)


def _imm(op) -> int | None:
    if type(op) is not Imm:
        return None
    try:
        return int(op.text, 0)
    except ValueError:
        return None


_BITS = re.compile(r"(?:v([248])\.)?[bsuf](8|16|32|64|128)$")


def _type_bits(t: str) -> int:
    """Bits moved by a ``.b32`` / ``.v2.b32`` type suffix (0 if it is none)."""
    m = _BITS.match(t)
    if m is None:
        return 0
    return int(m.group(2)) * (int(m.group(1)) if m.group(1) else 1)


def _impure(o: Instruction) -> str:
    """Why the original instruction is not a side-effect free definition that reads no
    register ('' when it is one)."""
    base = o.opcode.split(".", 1)[0]
    if base not in ("mov", "cvta"):
        return f"is a '{base}', not a mov or cvta"
    if o.guard >= 0:
        return "is guarded"
    if len(o.ops) != 2 or type(o.ops[0]) is not Reg or o.ops[0].comp or len(o.defs) != 1:
        return "does not define exactly one whole register"
    if o.uses:
        return "reads a register"
    src = o.ops[1]
    if type(src) is Imm:
        return ""
    if type(src) is Sym:
        if not src.text.startswith("%") or _FIXED_SPECIAL.match(src.text):
            return ""
        return f"reads '{src.text}', which is not constant for the thread"
    return "has a source that is neither an immediate nor a symbol"


_PLACEHOLDER = "\x00"


def _match_rendering(o: Instruction, text: str) -> list[tuple[int, str]] | None:
    """The register names of ``text`` if it is the original instruction ``o`` with its
    registers renamed: one (original value, name) per register reference, in render order."""
    occ: list[int] = []

    def name(v: int) -> str:
        occ.append(v)
        return _PLACEHOLDER
    rendered = o.render(name)
    pieces = rendered.split(_PLACEHOLDER)
    pat = r"(%?[\w$]+)".join(r"\s*".join(re.escape(w) for w in re.split(r"\s+", piece))
                             for piece in pieces)
    m = re.fullmatch(r"\s*" + pat + r"\s*", text)
    if m is None:
        return None
    groups = list(m.groups())
    if o.guard >= 0:
        # render() names the operands first and the guard last, but the guard comes first
        # in the text
        occ = occ[-1:] + occ[:-1]
    return list(zip(occ, groups))


def check_function(original: Function, allocated: Function,
                   header: dict[str, str] | None = None,
                   module_decls: list[str] = ()) -> FunctionProof:
    """Prove ``allocated`` (parsed from allocated PTX) computes what ``original`` computes;
    raises VerificationError naming what is wrong."""
    if header is None:
        header = read_header(allocated)
        if header is None:
            raise CheckerInputError(f"function '{allocated.name}' carries no //@ptxalloc header")
    if header.get("schedule") == "1":
        original = scheduled_original(original, allocated)
    return FunctionChecker(original, allocated, header, module_decls).run()
