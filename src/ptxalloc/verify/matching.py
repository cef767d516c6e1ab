"""Matching the allocated function against the original (SPEC section 9; docs/allocated-ptx.md),
and decoding every allocated statement into an event (:mod:`.events`) for the dataflow.

Every allocated instruction without a ``//@`` annotation must be the next original instruction
— same opcode, same guard sense, same operand structure and non-register text — with each
register operand replaced by a physical location of the right class; a ``//@removed`` comment
line consumes the next original instruction; labels and directives must sit where the original
has them. The rest are inserted instructions (docs/allocated-ptx.md): ``//@spill`` stores,
``//@reload`` loads, ``//@move`` copies, ``//@pspill``/``//@preload`` predicate saves and
restores, ``//@remat`` recomputations, ``//@serialize`` waits, and for the calling convention
``//@save``/``//@restore`` around calls and ``//@csave``/``//@crestore`` of callee-saved
registers, each of its one documented form.

Matching also checks what needs no dataflow: every register is a legal placement of its value
(:mod:`.placements`: class, budget, declaration, register tuples, spill slots, the convention's
bindings); the spill array is declared ``.align 16`` with the frame's bytes; and the header
carries ``abi=1`` wherever the convention applies (a ``.func``, or a function with a ``call``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import VerificationError
from ..ir import isa
from ..ir.effects import PURE, effect_kind, uses_carry
from ..ir.instruction import COMMENT, DEF, DIRECTIVE, USE, Instruction, Label, Raw
from ..ir.module import Function
from ..ir.operands import Args, Imm, Mem, Neg, Not, Pair, Reg, Sink, Sum, Sym, Vec
from .bindings import find_bindings
from .blocks import Blocks
from .convention import callee_saved, caller_saved
from .events import (Copy, Event, InFlight, Original, Remat, RemovedCopy, RemovedDef, Serialized,
                     Wait)
from .fences import FENCE_OPCODE, MMA_FAMILY, check_fenced_accesses
from .header import (ANNOTATION, DEAD, HEADER, HOIST, INDUCTION, MERGED, PROMOTE, RECOMPUTE,
                     REMOVED, SBASE, SERIALIZE, Header)
from .locations import CLASS_BITS, CLASS_FAMILY, CLASS_UNIFORM_FAMILY, Locations
from .messages import Messages, first_diff
from .placements import Placements
from .schedule import SCHEDULE
from .shared import ABI_REASON, BASE_OFFSET, SCRATCH_OFFSET, BaseRun, check_area


#: the stand-in opcode of a merged spill access's second and later members in the CFG
MERGED_MEMBER = "ptxalloc.merged"


class Matched(NamedTuple):
    """What matching hands on: the events in allocated order, the allocated CFG over them, the
    counts for the proof, and the entry facts (old-ABI ``.reg`` parameters; ``entry`` as
    :class:`.dataflow.Dataflow` takes it)."""

    events: list
    cfg: Blocks
    instructions: int                 # original instructions
    inserted: dict[str, int]          # inserted instructions by annotation
    removed: int
    in_params: tuple[int, ...]
    entry: list[tuple[int, int, bool]]


def pass_records(header: Header) -> tuple[tuple[str, bool], ...]:
    """Each pre-pass record prefix with whether the header names its pass."""
    return ((SCHEDULE, header.scheduled), (HOIST, header.hoisted), (PROMOTE, header.promoted),
            (RECOMPUTE, header.recomputed), (DEAD, header.recomputed),
            (INDUCTION, header.induced))


def refuse_unnamed_records(allocated: Function, header: Header, where: str) -> None:
    """A pre-pass record line whose pass the header does not name is an unknown annotation,
    refused before any record is replayed (replaying the others without it would fail on
    another line, with a reason that is not the cause)."""
    unnamed = tuple(prefix + " " for prefix, on in pass_records(header) if not on)
    for s in allocated.body:
        if type(s) is Raw and s.kind == COMMENT and s.text.startswith(unnamed):
            raise VerificationError(f"{where}, line {s.line}: unknown annotation '{s.text}' "
                                    f"(the header does not name its pass)")


class Matcher:
    """Matches one allocated function against its original."""

    def __init__(self, original: Function, allocated: Function, header: Header,
                 module_decls: list[str], locs: Locations, msgs: Messages):
        self.orig = original
        # a kernel's parameters are read-only: a load of one is a constant for the run
        self.kernel_params = frozenset(p.name for p in original.params
                                       if original.is_entry and p.space == "param")
        self.alloc = allocated
        self.module_decls = module_decls
        self.budget = header.budget
        self.stem = header.stem
        self.spill = header.spill
        self.frame = header.frame
        self.abi = header.abi
        self.shared = header.shared
        self.block = header.block
        # the record lines of the pre-passes the header names (checker.py replays them)
        self.pass_lines = tuple(prefix + " " for prefix, on in pass_records(header) if on)
        self.locs = locs
        self.msgs = msgs
        self.fail_at = msgs.fail_at
        self.vname = msgs.vname
        self.where_fn = msgs.where_fn
        self._special = msgs.special
        self.sites = msgs.sites
        self.oregs = original.regs
        self.aregs = allocated.regs
        self.places = places = Placements(original, allocated, header, locs, msgs)
        self.oclass = places.oclass
        self.vcode = places.vcode
        self._aloc_cache = places.cache
        self.value_loc = places.value_loc
        self.slot_loc = places.slot_loc
        self.removed = 0

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
            for r in callee_saved(self.budget):
                self.callee_values[r] = n + r
        if not self.abi and (not orig.is_entry or any(o.base == "call" for o in self.oinstrs)):
            why = "it makes a call" if orig.is_entry else "a .func"
            raise VerificationError(f"{self.where_fn()}: the header lacks abi=1, but the "
                                    f"calling convention applies ({why})")
        self.bindings = (find_bindings(orig, self.module_decls, self.budget, self.oclass)
                         if self.abi else {})
        if self.shared and self.abi:
            raise VerificationError(f"{self.where_fn()}: spills to shared memory under the "
                                    f"calling convention (abi=1): {ABI_REASON}")

    # -- matching and decoding --

    def match(self) -> "Matched":
        """Match the allocated body against the original and decode every instruction into an
        event for the dataflow; builds the allocated CFG."""
        self._original_facts()
        self.base_run = self._base_run()
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
        # the previous label or instruction other than spill code (what a //@serialize follows)
        last = None
        fences: list[int] = []                  # the unguarded wgmma.fence events (:mod:`.fences`)
        mmas = False                            # whether a wgmma.mma_async is among them
        for s in self.alloc.body:
            t = type(s)
            before = last
            if t is Instruction:
                idx = len(events)
                m = re.match(ANNOTATION, s.comment) if s.comment else None
                merged = re.match(MERGED, s.comment) if s.comment and m is None else None
                if merged is not None:
                    if merged.group(3):
                        last = s
                elif m is None or not m.group(1) or m.group(1) == "remat":
                    last = s
                if s.opcode.startswith(FENCE_OPCODE) and s.guard < 0:
                    fences.append(idx)      # a guarded fence is a branch over one: no fence
                elif s.opcode.startswith(MMA_FAMILY):
                    mmas = True
            elif t is Label:
                last = s
            if t is Instruction and merged is not None:
                # one event per member, the first at the instruction itself, the others at
                # stand-ins after it (the events and the CFG's statements correspond 1:1)
                kind = merged.group(1) or merged.group(3)
                got = self._merged(s, merged, idx)
                events.extend(got)
                counts[kind] = counts.get(kind, 0) + len(got)
                counts["merged"] = counts.get("merged", 0) + 1
                syn_body.append(s)
                syn_body.extend(Instruction(MERGED_MEMBER, [], line=s.line) for _ in got[1:])
                self.base_run.interrupt()
            elif t is Instruction:
                if m is not None:
                    self.sites.append((s, s.line, None))
                    kind = m.group(1) or m.group(4)
                    if m.group(1):
                        events.append(self._inserted(s, m, idx))
                    else:
                        events.append(self._callee_save(s, kind, int(m.group(5)), idx))
                    counts[kind] = counts.get(kind, 0) + 1
                elif s.comment.strip() == SERIALIZE:
                    self.sites.append((s, s.line, None))
                    events.append(self._serialize(s, idx, before))
                    counts["serialize"] = counts.get("serialize", 0) + 1
                elif s.comment.strip() == SBASE:
                    self.sites.append((s, s.line, None))
                    events.append(self._sbase(s, idx))
                    counts["sbase"] = counts.get("sbase", 0) + 1
                    syn_body.append(s)
                    continue
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
                self.base_run.interrupt()
            elif t is Label:
                alabels.append((s.name, oi))
                syn_body.append(s)
                self.base_run.interrupt()
            elif t is Raw:
                if s.kind == COMMENT and s.text.startswith(REMOVED):
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
                    self.removed += 1
                    self.base_run.interrupt()
                    syn_body.append(Instruction("ptxalloc.removed", [], line=s.line))
                elif s.kind == DIRECTIVE:
                    text = " ".join(s.text.split())
                    if self.spill is not None and re.match(
                            (r"\.shared\s.*\b" if self.shared else r"\.local\s.*\b")
                            + re.escape(self.spill) + r"\s*\[", text):
                        array_decl = text
                    else:
                        adirs.append(text)
                elif s.kind == COMMENT and s.text.startswith("//@") and not s.text.startswith(
                        HEADER) and not s.text.startswith(self.pass_lines):
                    raise VerificationError(f"{self.where_fn()}, line {s.line}: unknown "
                                            f"annotation '{s.text}'")
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
                                    f"original's ({first_diff(adirs, odirs)})")
        if self.alloc.branch_targets != self.orig.branch_targets:
            raise VerificationError(f"{self.where_fn()}: branch target lists differ")
        if self.spill is not None and not self.shared:     # a shared area: _base_run
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
        elif array_decl is not None and self.spill is None:
            raise VerificationError(f"{self.where_fn()}: a spill array is declared but the "
                                    f"header names none")
        cfg = Blocks(syn_body, self.alloc.branch_targets, self.alloc.name, self.alloc.filename)
        if mmas:
            check_fenced_accesses(events, fences, cfg, self.fail_at, self.locs.display)
        # what holds a value at entry besides the implicit values
        entry = [(self.locs.pinned(self.oregs.names[v]), v, False) for v in self.in_params]
        entry += [(self.places.reg_loc(r), e, True) for r, e in self.callee_values.items()]
        return Matched(events, cfg, n_orig, counts, self.removed, self.in_params, entry)

    def _original(self, o: Instruction, a: Instruction, idx: int) -> Event:
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
        if vecs:
            for vec, align in isa.tuple_operands(o, self.oregs):
                self.places.check_tuple(vec, vecs.get(id(vec)), align, idx)
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
                    uses.append((self.places.reg_loc(r), e,
                                 self._special(f"callee-saved R{r} (its value at entry)")))
            elif base == "call" and self.abi:
                clobber = tuple(self.places.reg_loc(r) for r in caller_saved(self.budget))
            elif base in ("wgmma", "tcgen05"):
                got = isa.async_operands(o)
                if got is not None:
                    values, wait = got
                    # every operand register the instruction keeps accessing, whether a
                    # vector member or a plain register (tcgen05.ld.red's redval)
                    accessed = dict.fromkeys((loc, v) for loc, v in defs if v in values)
                    accessed.update(((loc, v), None) for loc, v, _ in uses if v in values)
                    asyn = InFlight(tuple(accessed), wait, base + "." + opc.split(".")[1],
                                    frozenset((loc, v) for loc, v in defs if v in values))
                if opc.startswith("wgmma.wait_group"):
                    if o.ops and type(o.ops[0]) is Imm and o.ops[0].text.strip() == "0":
                        wait_clear = "wgmma.wait_group"
                elif opc.startswith(("tcgen05.wait::ld", "tcgen05.wait::st")):
                    wait_clear = opc[:len("tcgen05.wait::ld")]
        if self.bindings:
            bound = self.bindings.get(id(o))
            if bound is not None:
                self.places.check_bindings(bound, o, a, idx)
        guarded = o.guard >= 0
        # a guarded definition does not kill
        return Original(idx, tuple(uses), tuple(defs), guarded, clobber, asyn, wait_clear, opc,
                        gen, 0 if guarded else kill, gen | kill)

    def _serialize(self, a: Instruction, idx: int, before) -> Event:
        """``//@serialize``: a ``wgmma`` synchronisation the allocator inserted
        (:mod:`ptxalloc.passes.serialize_wgmma`), each right after (``before``: the previous
        label or instruction, spill code aside) what makes it sound:

        * ``wgmma.wait_group.sync.aligned 0`` after an unguarded ``wgmma.commit_group``:
          every ``wgmma.mma_async`` issued is then in a committed group, which is all a
          ``wait_group`` waits for. Waiting earlier only shortens the asynchrony: it reads and
          writes no register, and retires the in-flight wgmma registers as an original
          ``wait_group 0`` does;
        * ``wgmma.commit_group.sync.aligned`` after an unguarded ``wgmma.mma_async`` (a group
          split off; the wait that follows completes it, so later waits wait as before);
        * ``wgmma.fence.sync.aligned`` after an inserted wait (it only orders register
          accesses before the next ``wgmma``).

        No label between, no guard: each is executed by exactly the warpgroup's threads that
        executed the instruction before it, as ``.aligned`` requires."""
        ops = a.ops
        form = {"wgmma.wait_group.sync.aligned": "wgmma.commit_group.sync.aligned",
                "wgmma.commit_group.sync.aligned": "wgmma.mma_async",
                "wgmma.fence.sync.aligned": "wgmma.wait_group.sync.aligned"}
        follows = form.get(a.opcode)
        if (a.guard >= 0 or follows is None
                or (ops != [] if follows != "wgmma.commit_group.sync.aligned" else
                    (len(ops) != 1 or type(ops[0]) is not Imm or ops[0].text.strip() != "0"))):
            raise self.fail_at(idx, "a //@serialize instruction must be an unguarded "
                                    "'wgmma.wait_group.sync.aligned 0', "
                                    "'wgmma.commit_group.sync.aligned' or "
                                    "'wgmma.fence.sync.aligned'")
        if (type(before) is not Instruction or before.guard >= 0
                or not before.opcode.startswith(follows)
                or (follows == "wgmma.wait_group.sync.aligned"
                    and before.comment.strip() != SERIALIZE)):
            what = a.opcode.split(".")[1]
            why = {"wait_group": "a wait before a commit does not wait for the wgmma issued "
                                 "since the last commit",
                   "commit_group": "a commit elsewhere would close a group the program did "
                                   "not close after a wgmma",
                   "fence": "the fence orders the register writes after the inserted wait "
                            "before the next wgmma"}[what]
            raise self.fail_at(idx, f"a //@serialize {what} must follow an unguarded "
                                    f"'{follows}'"
                                    + (" //@serialize" if what == "fence" else "")
                                    + f" directly ({why})")
        return Wait(idx) if follows == "wgmma.commit_group.sync.aligned" else Serialized(idx)

    def _base_run(self) -> BaseRun:
        """The symbolic evaluator of the ``//@sbase`` entry sequence (:mod:`.shared`), after
        the shared spill area's declaration and block size are checked."""
        if not self.shared:
            return BaseRun("", 0, False)
        decl = None
        for s in self.alloc.body:
            if type(s) is Raw and s.kind == DIRECTIVE and re.match(
                    r"\.shared\s.*\b" + re.escape(self.spill) + r"\s*\[", s.text):
                decl = " ".join(s.text.split())
        word = re.compile(r"(?<![\w$])" + re.escape(self.spill) + r"(?![\w$])")
        if any(word.search(d) for d in self.module_decls) or any(
                word.search(o.render(str)) for o in self.oinstrs) or any(
                word.search(s.text) for s in self.orig.body
                if type(s) is Raw and s.kind == DIRECTIVE):
            raise VerificationError(f"{self.where_fn()}: the shared spill area '{self.spill}' "
                                    f"has a name the original module or function uses")
        one_dim = check_area(self.where_fn(), self.orig.directives, self.alloc.directives,
                             decl, self.spill, self.frame, self.block)
        return BaseRun(self.spill, self.frame, one_dim)

    def _sbase(self, a: Instruction, idx: int) -> Event:
        """``//@sbase``: one step of the entry sequence computing the shared spill frame's
        address; its destination holds that address or a scratch value afterwards."""
        if not self.shared:
            raise self.fail_at(idx, "an //@sbase instruction, but the header has no "
                                    "space=shared")
        got = self.base_run.step(a, self.aregs.names, self.stem)
        if type(got) is str:
            raise self.fail_at(idx, got)
        dst, is_base = got
        p = self.places.decode(self.aregs.names[dst], "destination", idx)
        self.places.check_decl(dst, p, "destination", idx)
        n = len(self.oregs)
        return Remat(idx, self.locs.register(p, self.aregs.names[dst]),
                     n + (BASE_OFFSET if is_base else SCRATCH_OFFSET))

    def _shared_slot(self, mem, width: int, idx: int) -> tuple[int, tuple]:
        """A shared spill slot ``[R+off]``: the slot of the frame, and the use of ``R``, which
        must hold this thread's frame address there (:mod:`.shared`)."""
        if type(mem) is not Mem or type(mem.base) is not Reg or mem.base.comp or mem.rest \
                or mem.suffix:
            raise self.fail_at(idx, "a shared spill slot must be addressed '[R+offset]' from "
                                    "the frame's address register")
        name = self.aregs.names[mem.base.v]
        p = self.places.decode(name, "the address register", idx)
        if type(p) is int or p.family != "R":
            raise self.fail_at(idx, f"the address register {name} is not a 32-bit register")
        self.places.check_decl(mem.base.v, p, "the address register", idx)
        slot = self.slot_loc(Mem(Sym(self.spill), mem.offset), width, idx)
        use = (self.locs.register(p, name), len(self.oregs) + BASE_OFFSET,
               self._special(f"the shared spill address {name}"))
        return slot, (use,)

    def _callee_save(self, a: Instruction, kind: str, r: int, idx: int) -> Event:
        """``//@csave Rn`` stores callee-saved Rn's entry value in the prologue of a ``.func``;
        ``//@crestore Rn`` puts it back before a ``ret``."""
        ops = a.ops
        prefix = "st.local." if kind == "csave" else "ld.local."
        if (a.guard >= 0 or not a.opcode.startswith(prefix) or len(ops) != 2
                or _type_bits(a.opcode[len(prefix):]) != 32):
            raise self.fail_at(idx, f"a {kind} of R{r} must be '{prefix}b32' with two operands")
        mem, reg = (ops[0], ops[1]) if kind == "csave" else (ops[1], ops[0])
        return self._callee_copy(kind, r, reg, mem, idx)

    def _callee_copy(self, kind: str, r: int, reg, mem, idx: int) -> Copy:
        """The copy of a callee save or restore of Rn: ``reg`` must be Rn, ``mem`` its 4-byte
        slot."""
        e = self.callee_values.get(r)
        if e is None:
            raise self.fail_at(idx, f"R{r} is not a callee-saved register of this function "
                                    f"(budget {self.budget}{'' if self.abi else ', no abi=1'})")
        if type(reg) is not Reg or reg.comp or self.aregs.names[reg.v] != f"%{self.stem}R{r}":
            raise self.fail_at(idx, f"a {kind} of R{r} must move %{self.stem}R{r}")
        p = self.places.decode(self.aregs.names[reg.v], "register", idx)
        self.places.check_decl(reg.v, p, "register", idx)
        rloc = self.places.reg_loc(r)
        slot = self.slot_loc(mem, 4, idx)
        if kind == "csave":
            return Copy(idx, rloc, slot, e, f"callee-saved R{r} save")
        return Copy(idx, slot, rloc, e, f"callee-saved R{r} restore")

    def _value_of(self, m: re.Match, idx: int) -> int:
        return self._value_named(m.group(2), int(m.group(3)), idx)

    def _value_named(self, name: str, vid: int, idx: int) -> int:
        """The original register an annotation names ``name#vid`` (checked)."""
        if vid >= len(self.oregs) or self.oregs.names[vid] != name:
            raise self.fail_at(idx, f"the annotation names {name}#{vid}, which is not a register "
                                    f"of the original function")
        return vid

    def _inserted(self, a: Instruction, m: re.Match, idx: int) -> Event:
        """An inserted instruction, checked for its documented form."""
        kind = m.group(1)
        v = self._value_of(m, idx)
        if a.guard >= 0:
            raise self.fail_at(idx, f"an inserted {kind} may not be guarded")
        cls = self.oclass[v]
        ops = a.ops
        opc = a.opcode
        home, width_bits = self._moved_as(kind, v, opc)
        if kind in ("spill", "reload", "save", "restore"):
            space = self._space(kind)
            prefix = f"st.{space}." if kind in ("spill", "save") else f"ld.{space}."
            if not opc.startswith(prefix) or _type_bits(opc[len(prefix):]) != width_bits \
                    or len(ops) != 2:
                raise self.fail_at(idx, f"a {kind} of {self.vname(v)} must be "
                                        f"'{prefix}b{width_bits}' with two operands")
            store = kind in ("spill", "save")
            mem, reg = (ops[0], ops[1]) if store else (ops[1], ops[0])
            return self._slot_copy(kind, v, reg, mem, idx)
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
            return Copy(idx, src, dst, v, "move")
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
                return Copy(idx, pred, home, v, "predicate save")
            pred = self.value_loc(ops[0].v, v, "", "predicate", idx)
            home = self.value_loc(ops[1].v, v, "", "home register", idx, "GPR32")
            return Copy(idx, home, pred, v, "predicate restore")
        # remat
        d = self.defs_of.get(v, [])
        if len(d) != 1:
            raise self.fail_at(idx, f"{self.vname(v)} has {len(d)} definitions in the original; "
                                    f"only a value with one can be rematerialized")
        o = d[0]
        why = _impure(o, self.kernel_params)
        reads = why and self._register_compare(o)
        if why and not reads:
            raise self.fail_at(idx, f"{self.vname(v)} cannot be rematerialized: its definition "
                                    f"(original line {o.line}) {why}")
        same = (lambda i, x, y: type(y) is Reg and not y.comp) if reads else (
            lambda i, x, y: _same_text(x, y))
        if (a.opcode != o.opcode or len(a.ops) != len(o.ops) or type(a.ops[0]) is not Reg
                or a.ops[0].comp or any(
                    not (same(i, x, y) if type(x) is Reg else _same_text(x, y))
                    for i, (x, y) in enumerate(zip(o.ops[1:], a.ops[1:]), 1))):
            raise self.fail_at(idx, f"a rematerialization of {self.vname(v)} must repeat its "
                                    f"definition '{o.render(self.oregs.names.__getitem__)}' "
                                    f"(original line {o.line}) with another destination"
                                    + (" and registers holding its operands" if reads else ""))
        dst = self.value_loc(a.ops[0].v, v, "", "destination", idx)
        if not reads:
            return Remat(idx, dst, v)
        # a predicate recomputed from registers: each one must hold its operand, unchanged
        # since the removed definition read it (the operand's snapshot still holds it)
        uses = tuple((self.value_loc(y.v, x.v, "", f"operand {i}", idx), x.v,
                      self._snapshot(v, i, x.v))
                     for i, (x, y) in enumerate(zip(o.ops[1:], a.ops[1:]), 1)
                     if type(x) is Reg)
        return Remat(idx, dst, v, uses)

    def _register_compare(self, o: Instruction) -> bool:
        """Whether original ``o`` is a predicate's unguarded ``setp`` of general registers and
        immediates, one destination: recomputable where its operands still hold the values it
        read (docs/checker.md, "Predicates recomputed from registers")."""
        if (o.opcode.split(".", 1)[0] != "setp" or o.guard >= 0 or len(o.defs) != 1
                or not o.ops or type(o.ops[0]) is not Reg or o.ops[0].comp
                or self.oclass[o.ops[0].v] != "PRED"):
            return False
        regs = [x for x in o.ops[1:] if type(x) is Reg]
        return bool(regs) and all(
            type(x) is Imm or (type(x) is Reg and not x.comp and self.oclass[x.v] != "PRED"
                               and x.v != o.ops[0].v) for x in o.ops[1:])

    def _snapshot(self, v: int, i: int, operand: int) -> int:
        """The snapshot location of operand ``i`` (register ``operand``) of ``v``'s
        definition."""
        return self.locs.snapshot(v, i, f"{self.vname(operand)} as {self.vname(v)}'s "
                                        f"definition read it")

    def _moved_as(self, kind: str, v: int, opc: str) -> tuple[str | None, int]:
        """How an inserted copy of value ``v`` moves it: the class it travels as when not its
        own (a predicate saved in its 32-bit home register by //@pspill travels as that
        register: spilled, reloaded or copied as a .b32 holding 0 or 1), and its width in
        bits (0 for a predicate)."""
        cls = self.oclass[v]
        home = None
        if cls == "PRED" and kind in ("spill", "reload", "save", "restore", "move") and not (
                kind == "move" and opc == "mov.pred"):
            home = "GPR32"
        width_bits = (CLASS_BITS[home or cls] * max(1, self.oregs.vec[v])
                      if (home or cls) != "PRED" else 0)
        return home, width_bits

    def _space(self, kind: str) -> str:
        """The state space a spill access of ``kind`` uses."""
        return "shared" if self.shared and kind in ("spill", "reload") else "local"

    def _slot_copy(self, kind: str, v: int, reg, mem, idx: int) -> Copy:
        """The copy a spill store, reload, save or restore of value ``v`` makes between
        register operand ``reg`` and the slot at ``mem``."""
        home, width_bits = self._moved_as(kind, v, "")
        if type(reg) is not Reg or reg.comp:
            raise self.fail_at(idx, f"the {kind}ed register is not a plain register")
        address = ()
        if self._space(kind) == "shared":
            slot, address = self._shared_slot(mem, width_bits // 8, idx)
        else:
            slot = self.slot_loc(mem, width_bits // 8, idx)
        rloc = self.value_loc(reg.v, v, "", "register", idx, home)
        what = {"spill": "spill store", "reload": "reload", "save": "save before a call",
                "restore": "restore after a call"}[kind]
        if kind in ("spill", "save"):
            return Copy(idx, rloc, slot, v, what, address)
        return Copy(idx, slot, rloc, v, what, address)

    def _merged(self, a: Instruction, m: re.Match, idx: int) -> list[Event]:
        """A merged spill access (docs/allocated-ptx.md, "Merged spill accesses"): one
        ``.v2``/``.v4`` store or reload of 32- or 64-bit values, at most 16 bytes, at an
        offset aligned to its whole size, doing what its members' scalar accesses do, member
        k between the k-th register and the k-th slot from that offset: one copy event per
        member, at ``idx``, ``idx + 1`` ... (their sites registered here)."""
        kind = m.group(1) or m.group(3)
        words = (m.group(2) or m.group(4)).split()
        n = len(words)
        for _ in words:
            self.sites.append((a, a.line, None))
        store = kind in ("spill", "save", "csave")
        space = self._space(kind)
        prefix = ("st." if store else "ld.") + space + "."
        form = re.fullmatch(re.escape(prefix) + r"v([24])\.b(32|64)", a.opcode)
        if a.guard >= 0:
            raise self.fail_at(idx, f"an inserted {kind} may not be guarded")
        if form is None or int(form.group(1)) != n or len(a.ops) != 2:
            forms = f"'{prefix}v{n}.b32'" + (f" or '{prefix}v{n}.b64'" if n == 2 else "")
            raise self.fail_at(idx, f"a merged {kind} of {n} values must be {forms} with an "
                                    f"address and a vector of {n} registers")
        bits = int(form.group(2))
        if n * bits > 128:
            raise self.fail_at(idx, f"a merged {kind} moves at most 16 bytes, not "
                                    f"{n * bits // 8}")
        mem, vec = (a.ops[0], a.ops[1]) if store else (a.ops[1], a.ops[0])
        if type(vec) is not Vec or len(vec.items) != n or any(
                type(r) is not Reg or r.comp for r in vec.items):
            raise self.fail_at(idx, f"a merged {kind} must move a vector of {n} plain "
                                    f"registers")
        # the whole access: in the frame (or the shared frame) and aligned to its size
        if space == "shared":
            self._shared_slot(mem, n * bits // 8, idx)
        else:
            self.slot_loc(mem, n * bits // 8, idx)
        off = int(mem.offset.replace(" ", "") or "0", 0)
        if not store and len({self.aregs.names[r.v] for r in vec.items}) < n:
            raise self.fail_at(idx, f"the registers of a merged {kind} must differ")
        out: list[Event] = []
        for k, (word, reg) in enumerate(zip(words, vec.items)):
            member = Mem(mem.base, f"+{off + k * bits // 8}")
            if kind in ("csave", "crestore"):
                if bits != 32:          # as the scalar form: a callee-saved register is .b32
                    raise self.fail_at(idx + k, f"a merged {kind} moves 32-bit registers, "
                                                f"not a .b{bits} access")
                out.append(self._callee_copy(kind, int(word[1:]), reg, member, idx + k))
                continue
            name, _, vid = word.rpartition("#")
            v = self._value_named(name, int(vid), idx + k)
            width = self._moved_as(kind, v, "")[1]
            if width != bits:
                raise self.fail_at(idx + k, f"member {k + 1} of a merged {kind} is "
                                            f"{self.vname(v)}, a {width}-bit value, in a "
                                            f".b{bits} access")
            out.append(self._slot_copy(kind, v, reg, member, idx + k))
        return out

    def _removed(self, o: Instruction, text: str, idx: int) -> Event:
        body = text[len(REMOVED):].strip()
        names = _match_rendering(o, body)
        if names is None:
            raise self.fail_at(idx, f"the removed instruction is not the original "
                                    f"'{o.render(self.oregs.names.__getitem__)}'")
        if o.is_copy and o.guard < 0 and names[0][1] == names[1][1]:
            d, s = o.ops[0].v, o.ops[1].v
            nd = names[0][1]
            p = self.places.decode(nd, "the copy", idx)
            if type(p) is int:
                loc = p
            else:
                cls = self.oclass[d]
                if p.family not in (CLASS_FAMILY[cls], CLASS_UNIFORM_FAMILY.get(cls)) and not (
                        p.family == "V" and self.oregs.vec[d] > 1):
                    raise self.fail_at(idx, f"{nd} cannot hold {self.vname(d)}, a {cls} value")
                loc = self.locs.register(p, nd)
            return RemovedCopy(idx, loc, d, s)
        # a copy between two registers, the definition of a rematerialized value or any pure
        # definition: held nowhere afterwards, so sound whatever it reads
        if not _defines_one_register(o):
            raise self.fail_at(idx, f"only a copy within one register, the definition of a "
                                    f"rematerialized value or a pure definition may be "
                                    f"removed; this one does not define exactly one whole "
                                    f"register")
        why = _impure(o, self.kernel_params)
        v = o.ops[0].v
        if not why:
            return RemovedDef(idx, v)
        if self._register_compare(o):
            return RemovedDef(idx, v, tuple((self._snapshot(v, i, x.v), x.v)
                                            for i, x in enumerate(o.ops[1:], 1) if type(x) is Reg))
        why_not_pure = _not_dead_removable(o)
        if why_not_pure:
            raise self.fail_at(idx, f"only a copy within one register, the definition of a "
                                    f"rematerialized value or a pure definition may be "
                                    f"removed; this one {why} and {why_not_pure}")
        return RemovedDef(idx, v)



#: Special registers whose value is fixed for the thread's lifetime (PTX ISA chapter 10): a
#: ``mov`` of one can be recomputed anywhere. %clock, %warpid, %smid and the like are not.
_FIXED_SPECIAL = re.compile(
    r"%(?:tid|ntid|ctaid|nctaid|laneid|gridid|nsmid|lanemask_(?:eq|le|lt|ge|gt)|clusterid"
    r"|nclusterid|cluster_ctaid|cluster_nctaid|cluster_ctarank|cluster_nctarank"
    r"|is_explicit_cluster|total_smem_size|aggr_smem_size|dynamic_smem_size)(?:\.[xyzw])?$")


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


#: a text, compiled by re on first use: only spill code reads it (start-up, issue 16)
_BITS = r"(?:v([248])\.)?[bsuf](8|16|32|64|128)$"


def _type_bits(t: str) -> int:
    """Bits moved by a ``.b32`` / ``.v2.b32`` type suffix (0 if it is none)."""
    m = re.match(_BITS, t)
    if m is None:
        return 0
    return int(m.group(2)) * (int(m.group(1)) if m.group(1) else 1)


def _impure(o: Instruction, kernel_params: frozenset = frozenset()) -> str:
    """Why the original instruction is not a side-effect free definition that reads no
    register ('' when it is one); ``kernel_params`` are the names of the kernel's own
    parameters, whose loads qualify (a kernel's parameters are read-only)."""
    base = o.opcode.split(".", 1)[0]
    if o.opcode.startswith("ld.param") and len(o.ops) == 2:
        src = o.ops[1]
        if not (type(src) is Mem and type(src.base) is Sym and not src.rest and not src.suffix
                and src.base.text in kernel_params):
            return "loads from something that is not a parameter of this kernel"
    elif base not in ("mov", "cvta"):
        return f"is a '{base}', not a mov or cvta"
    if o.guard >= 0:
        return "is guarded"
    if len(o.ops) != 2 or type(o.ops[0]) is not Reg or o.ops[0].comp or len(o.defs) != 1:
        return "does not define exactly one whole register"
    if o.uses:
        return "reads a register"
    src = o.ops[1]
    if type(src) is Imm or type(src) is Mem:        # Mem: a kernel parameter, checked above
        return ""
    if type(src) is Sym:
        if not src.text.startswith("%") or _FIXED_SPECIAL.match(src.text):
            return ""
        return f"reads '{src.text}', which is not constant for the thread"
    return "has a source that is neither an immediate nor a symbol"


def _defines_one_register(o: Instruction) -> bool:
    """Whether ``o``'s first operand is the one whole register it defines."""
    return (len(o.defs) == 1 and bool(o.ops) and type(o.ops[0]) is Reg and not o.ops[0].comp
            and o.ops[0].v == o.defs[0])


def _not_dead_removable(o: Instruction) -> str:
    """Why the original instruction is not a definition that may be removed when its value
    is dead ('' when it is one): unguarded, one whole register defined, pure and outside the
    carry chain. Removing it is sound whatever it reads: its value is then held nowhere, and
    any later read of it is refuted."""
    if o.guard >= 0:
        return "is guarded"
    if not _defines_one_register(o):
        return "does not define exactly one whole register"
    if effect_kind(o) != PURE:
        return f"is a '{o.opcode}', which is not pure"
    if uses_carry(o):
        return "belongs to the carry chain"
    return ""


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


