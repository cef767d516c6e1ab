"""Placements: where an allocated register may live (SPEC section 2; docs/allocated-ptx.md,
"Physical register names"). Decodes each physical name of the allocated function into a
location (:mod:`.locations`) and checks it is a legal placement of the value it stands for:
its class's family (a vector register for a vector value), inside the budget, off R31 (the
frame pointer) under ``abi=1`` when K > 31, declared with its family's type; register tuples
consecutive from an aligned start; spill slots inside the frame and aligned to their width;
the operands the calling convention binds (:mod:`.bindings`) in their bound registers.
"""

from __future__ import annotations

from ..ir.instruction import Instruction
from ..ir.module import Function
from ..ir.operands import Mem, Reg, Sym, Vec
from .convention import FRAME_POINTER, reserves_frame_pointer
from .header import Header
from .locations import (CLASS_BITS, CLASS_FAMILY, CLASS_UNIFORM_FAMILY, FAMILY_TYPE, GPR,
                        Locations, NameDecoder, Placement, pow2_at_least)
from .messages import Messages


class Placements:
    """Decodes and checks the physical registers of one allocated function. Every check
    raises :meth:`.Messages.fail_at` for the event ``idx`` it is made for."""

    def __init__(self, original: Function, allocated: Function, header: Header,
                 locs: Locations, msgs: Messages):
        self.orig = original
        self.budget = header.budget
        self.stem = header.stem
        self.spill = header.spill
        self.frame = header.frame
        self.abi = header.abi
        self.decoder = NameDecoder(self.stem, self.budget)
        self.locs = locs
        self.fail_at = msgs.fail_at
        self.vname = msgs.vname
        self.oregs = original.regs
        self.aregs = allocated.regs
        self.oclass = [c.name for c in self.oregs.classes]
        # what decides a register's legal placements: class and vector arity, as a small code
        codes: dict[tuple, int] = {}
        self.vcode = [codes.setdefault((c, n), len(codes))
                      for c, n in zip(self.oclass, self.oregs.vec)]
        #: (allocated register, value's placement code) -> location, see :meth:`value_loc`
        self.cache: dict[tuple | int, int] = {}
        #: allocated register -> its decoded Placement (or a pinned register's location)
        self.decoded: dict[int, object] = {}
        self._pin_names: dict[str, int] | None = None

    def decode(self, name: str, where: str, idx: int) -> Placement | int:
        """The Placement a physical name decodes to, or a pinned ``.reg`` parameter's location;
        fails on a name that is neither."""
        p = self.decoder.decode(name)
        if isinstance(p, str):
            raise self.fail_at(idx, f"{where}: {p}")
        if p is None:
            pins = self.pins()
            if name in pins:
                return self.locs.pinned(name)
            raise self.fail_at(idx, f"{where}: '{name}' is not a physical register name")
        return p

    def pins(self) -> dict[str, int]:
        """The old-ABI ``.reg`` parameters (which keep their names): name -> value."""
        got = self._pin_names
        if got is None:
            got = {p.name: p.vid for p in self.orig.params + self.orig.returns
                   if p.space == "reg" and p.vid >= 0}
            self._pin_names = got
        return got

    def check_decl(self, avid: int, p: Placement, where: str, idx: int) -> None:
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
        got = self.cache.get(key)
        if got is not None:
            return got
        name = self.aregs.names[avid]
        dec = self.decoded.get(avid)
        if dec is None:
            p = self.decode(name, where, idx)
            if type(p) is not int:
                self.check_decl(avid, p, where, idx)
                if (self.abi and reserves_frame_pointer(self.budget) and p.space == GPR
                        and p.start < 2 * FRAME_POINTER + 2
                        and p.start + p.size > 2 * FRAME_POINTER):
                    raise self.fail_at(idx, f"{where}: {name} uses R{FRAME_POINTER}, the frame "
                                            f"pointer under the calling convention (abi=1)")
            dec = self.decoded[avid] = p
        p = dec
        if type(p) is int:                       # a pinned register (not cached: depends on v)
            if home_class is None and self.pins().get(name) != v:
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
            ok = p.family == CLASS_FAMILY[cls] or p.family == CLASS_UNIFORM_FAMILY.get(cls)
            need = "%" + CLASS_FAMILY[cls]
        if not ok:
            what = self.vname(v) if home_class is None else f"its {cls} home"
            raise self.fail_at(idx, f"{where}: {name} cannot hold {what}, a {cls}"
                                    f"{f' x{vec}' if vec > 1 else ''} value (needs {need})")
        loc = self.locs.register(p, name)
        self.cache[key] = loc
        return loc

    def slot_loc(self, mem, width: int, idx: int) -> int:
        """The spill slot ``[array+off]`` of ``width`` bytes, inside the frame and aligned."""
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

    def check_bindings(self, bound, o: Instruction, a: Instruction, idx: int) -> None:
        """Each register operand the calling convention binds (:mod:`.bindings`) is the bound
        register itself."""
        for b in bound:
            i, j = b.path
            x = o.ops[i] if j < 0 else o.ops[i].items[j]
            y = a.ops[i] if j < 0 else a.ops[i].items[j]
            name = self.aregs.names[y.v]
            p = self.decoded.get(y.v)
            if p is None:
                p = self.decode(name, f"operand {i + 1}", idx)
            if type(p) is int or p.space != GPR or p.start != 2 * b.reg:
                where = f"operand {i + 1}" + (f" member {j + 1}" if j >= 0 else "")
                want = b.wanted(self.stem, self.oclass[x.v], self.oregs.vec[x.v])
                raise self.fail_at(idx, f"{where}: {name} breaks the calling convention's "
                                        f"binding (abi=1, budget {self.budget}): {b.what} "
                                        f"must be in {want}")

    def check_tuple(self, vec: Vec, avec: Vec | None, align: int, idx: int) -> None:
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

    def reg_loc(self, r: int) -> int:
        """The location of 32-bit register Rn (the convention's saved registers)."""
        return self.locs.register(Placement("R", r, GPR, 2 * r, 2), f"%{self.stem}R{r}")
