"""Instruction operands (PTX ISA "Operand Types", "Vectors", "Addresses as Operands").

Operands are small slotted objects. Registers are referred to by their dense virtual-register
id, so that an allocation can rename them without touching text; everything that is not a
register (immediates, symbols, labels, special registers such as ``%tid.x``) is kept as its
source text and written back verbatim.

    Reg(v, comp)        a register; ``comp`` is "" or a component (".x") of a vector register
    Vec([..])           a vector operand {a, b, c, d}: members are Reg, Imm or Sink
    Mem(base, off, [..]) an address [base+off] or [base, x, {..}] (textures): base is Reg, Sym
                        or Imm, ``off`` the offset text ("", "+8", "+-4"), the list further
                        bracket members
    Imm(text)           an immediate in any PTX form (0f3F800000, 0d.., 0x10, -4, 1.5)
    Sym(text)           a symbol, label, function name or special register
    Sink()              the sink "_"
    Pair(a, b)          "p|q" (setp, shfl.sync, elect.sync ...): members Reg or Sink
    Not(reg)            "!p" predicate operand
    Neg(reg)            "-r" negated register (video instructions)
    Sum(reg, off)       "r + 4": a register plus a constant
    Args([..])          a parenthesised list "(a, b)" of call return or argument operands
"""

from __future__ import annotations

from collections.abc import Callable, Iterator


class Operand:
    """Base of every operand: ``regs`` yields its register references, ``render`` writes it
    with ``name(v)`` for each register, ``map_regs`` copies it with registers replaced."""

    __slots__ = ()

    def regs(self) -> Iterator["Reg"]:
        """Every register reference inside this operand, in textual order."""
        return iter(())

    def render(self, name: Callable[[int], str]) -> str:
        """The operand as PTX text, each register written as ``name(v)``."""
        raise NotImplementedError

    def map_regs(self, fn: Callable[["Reg"], "Operand"]) -> "Operand":
        """A copy with every register reference replaced by ``fn(reg)``."""
        return self


class Reg(Operand):
    """A register reference: virtual-register id ``v`` and ``comp``, "" or a vector
    register's component (".x")."""

    __slots__ = ("v", "comp")

    def __init__(self, v: int, comp: str = ""):
        self.v = v
        self.comp = comp

    def regs(self):
        yield self

    def render(self, name):
        return name(self.v) + self.comp

    def map_regs(self, fn):
        return fn(self)

    def __eq__(self, other):
        return isinstance(other, Reg) and other.v == self.v and other.comp == self.comp

    def __hash__(self):
        return hash((self.v, self.comp))

    def __repr__(self):
        return f"Reg({self.v}{self.comp})"


class Imm(Operand):
    """An immediate, kept as its source text (``0f3F800000``, ``0x10``, ``-4``)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def render(self, name):
        return self.text

    def __eq__(self, other):
        return isinstance(other, Imm) and other.text == self.text

    def __hash__(self):
        return hash(("imm", self.text))

    def __repr__(self):
        return f"Imm({self.text})"


class Sym(Operand):
    """A symbol, label, function name or special register (``%tid.x``), kept as its text."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def render(self, name):
        return self.text

    def __eq__(self, other):
        return isinstance(other, Sym) and other.text == self.text

    def __hash__(self):
        return hash(("sym", self.text))

    def __repr__(self):
        return f"Sym({self.text})"


class Sink(Operand):
    """The sink ``_``: a result that is discarded."""

    __slots__ = ()

    def render(self, name):
        return "_"

    def __eq__(self, other):
        return isinstance(other, Sink)

    def __hash__(self):
        return hash("_")

    def __repr__(self):
        return "Sink()"


SINK = Sink()


class Vec(Operand):
    """A vector operand ``{a, b, c, d}``: members are Reg, Imm or Sink."""

    __slots__ = ("items",)

    def __init__(self, items: list[Operand]):
        self.items = items

    def regs(self):
        for it in self.items:
            if type(it) is Reg:
                yield it

    def render(self, name):
        return "{" + ", ".join(it.render(name) for it in self.items) + "}"

    def map_regs(self, fn):
        return Vec([it.map_regs(fn) for it in self.items])

    def __eq__(self, other):
        return isinstance(other, Vec) and other.items == self.items

    def __hash__(self):
        return hash(tuple(self.items))

    def __repr__(self):
        return f"Vec({self.items})"


class Mem(Operand):
    """An address ``[base+offset]`` or ``[base, x, {..}]`` (textures): ``base`` a Reg, Sym or
    Imm (or None), ``offset`` its text ("", "+8"), ``rest`` the further bracket members,
    ``suffix`` a ``.name`` selector after the bracket."""

    __slots__ = ("base", "offset", "rest", "suffix")

    def __init__(self, base: Operand | None, offset: str = "", rest: list[Operand] | None = None,
                 suffix: str = ""):
        self.base = base
        self.offset = offset
        self.rest = rest or []
        self.suffix = suffix

    def regs(self):
        if self.base is not None:
            yield from self.base.regs()
        for it in self.rest:
            yield from it.regs()

    def render(self, name):
        inner = (self.base.render(name) if self.base is not None else "") + self.offset
        if self.rest:
            inner = ", ".join([inner] + [it.render(name) for it in self.rest])
        return "[" + inner + "]" + self.suffix

    def map_regs(self, fn):
        return Mem(self.base.map_regs(fn) if self.base is not None else None, self.offset,
                   [it.map_regs(fn) for it in self.rest], self.suffix)

    def __eq__(self, other):
        return (isinstance(other, Mem) and other.base == self.base and other.offset == self.offset
                and other.rest == self.rest and other.suffix == self.suffix)

    def __hash__(self):
        return hash((self.base, self.offset, tuple(self.rest)))

    def __repr__(self):
        return f"Mem({self.base!r}{self.offset}{', ' + repr(self.rest) if self.rest else ''})"


class Pair(Operand):
    """``p|q`` (``setp``, ``shfl.sync``, ``elect.sync`` ...): two results, Reg or Sink."""

    __slots__ = ("a", "b")

    def __init__(self, a: Operand, b: Operand):
        self.a = a
        self.b = b

    def regs(self):
        yield from self.a.regs()
        yield from self.b.regs()

    def render(self, name):
        return self.a.render(name) + "|" + self.b.render(name)

    def map_regs(self, fn):
        return Pair(self.a.map_regs(fn), self.b.map_regs(fn))

    def __eq__(self, other):
        return isinstance(other, Pair) and other.a == self.a and other.b == self.b

    def __hash__(self):
        return hash(("|", self.a, self.b))

    def __repr__(self):
        return f"Pair({self.a!r}, {self.b!r})"


class _Prefixed(Operand):
    """A register operand behind a one-character prefix (``!%p``, ``-%r``)."""

    __slots__ = ("reg",)
    prefix = ""

    def __init__(self, reg: Operand):
        self.reg = reg

    def regs(self):
        yield from self.reg.regs()

    def render(self, name):
        return self.prefix + self.reg.render(name)

    def map_regs(self, fn):
        return type(self)(self.reg.map_regs(fn))

    def __eq__(self, other):
        return type(other) is type(self) and other.reg == self.reg

    def __hash__(self):
        return hash((self.prefix, self.reg))

    def __repr__(self):
        return f"{type(self).__name__}({self.reg!r})"


class Not(_Prefixed):
    """``!%p`` — a negated predicate operand."""

    __slots__ = ()
    prefix = "!"


class Neg(_Prefixed):
    """``-%r`` — a negated register operand (video instructions' ``vmad``)."""

    __slots__ = ()
    prefix = "-"


class Sum(Operand):
    """``reg + imm`` / ``reg - imm`` — a register plus a constant outside brackets (PTX accepts
    it as a source operand)."""

    __slots__ = ("reg", "offset")

    def __init__(self, reg: Operand, offset: str):
        self.reg = reg
        self.offset = offset

    def regs(self):
        yield from self.reg.regs()

    def render(self, name):
        return self.reg.render(name) + self.offset

    def map_regs(self, fn):
        return Sum(self.reg.map_regs(fn), self.offset)

    def __eq__(self, other):
        return isinstance(other, Sum) and other.reg == self.reg and other.offset == self.offset

    def __hash__(self):
        return hash(("+", self.reg, self.offset))

    def __repr__(self):
        return f"Sum({self.reg!r}{self.offset})"


class Args(Operand):
    """A parenthesised list ``(a, b)`` of a ``call``'s return or argument operands."""

    __slots__ = ("items",)

    def __init__(self, items: list[Operand]):
        self.items = items

    def regs(self):
        for it in self.items:
            yield from it.regs()

    def render(self, name):
        return "(" + ", ".join(it.render(name) for it in self.items) + ")"

    def map_regs(self, fn):
        return Args([it.map_regs(fn) for it in self.items])

    def __eq__(self, other):
        return isinstance(other, Args) and other.items == self.items

    def __hash__(self):
        return hash(("()", tuple(self.items)))

    def __repr__(self):
        return f"Args({self.items})"
