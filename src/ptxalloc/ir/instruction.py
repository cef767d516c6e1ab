"""Instructions and the other statements of a function body.

An :class:`Instruction` keeps its full opcode with every modifier (``ld.global.nc.v4.f32``), its
guard (``@%p`` / ``@!%p``) as a register id, and its operands (see :mod:`operands`). The ISA table
(:mod:`isa`) gives each operand a role (defined, used, both) from which the instruction's
``defs`` and ``uses`` tuples of register ids are derived once, when the instruction is built.

Everything in a body that is not an instruction is a :class:`Label` or a :class:`Raw` statement
(declarations, directives, ``.loc`` lines, comments, scope braces) kept verbatim for the emitter.
"""

from __future__ import annotations

from collections.abc import Callable

from .operands import Imm, Mem, Operand, Reg, Sym

# Operand roles.
NONE, DEF, USE, USEDEF = 0, 1, 2, 3


#: opcode -> opcode without modifiers, one string per opcode (parsing meets each thousands of
#: times)
_BASES: dict[str, str] = {}


def _base_of(opcode: str) -> str:
    base = _BASES[opcode] = opcode.split(".", 1)[0]
    return base


class Instruction:
    """One PTX instruction: full ``opcode``, ``guard`` register id (-1 for none) and
    ``guard_neg``, ``ops``, and from the ISA table each operand's role and the ``defs`` and
    ``uses`` register ids (:meth:`set_roles`); ``is_copy`` for a whole-register ``mov``,
    ``known`` False for an opcode the table does not know; ``line`` and ``loc`` its source;
    ``origin`` None for a parsed instruction, else what inserted it."""

    __slots__ = ("opcode", "base", "guard", "guard_neg", "ops", "roles", "defs", "uses", "line",
                 "loc", "comment", "origin", "is_copy", "known", "implicit_uses")

    def __init__(self, opcode: str, ops: list[Operand], guard: int = -1, guard_neg: bool = False,
                 line: int = 0, loc=None, comment: str = ""):
        self.opcode = opcode
        # the opcode without modifiers (``ld`` for ``ld.global.f32``), split once here rather
        # than on every read (issue 16: 270k splits on one file); the opcode never changes
        self.base: str = _BASES.get(opcode) or _base_of(opcode)
        self.ops = ops
        self.guard = guard
        self.guard_neg = guard_neg
        self.line = line
        self.loc = loc
        self.comment = comment
        self.origin = None
        self.roles: tuple[int, ...] = ()
        self.defs: tuple[int, ...] = ()
        self.uses: tuple[int, ...] = ()
        self.is_copy = False
        self.known = True
        self.implicit_uses: tuple[int, ...] = ()

    def set_roles(self, roles: tuple[int, ...]) -> None:
        """Fix each operand's role and derive ``defs`` and ``uses`` from them.

        Registers inside an address are always uses; a register with a vector component in a
        defined position (``mov.u32 v.x, r``) is a partial definition and so also a use; the
        guard is a use.
        """
        self.roles = roles
        defs: list[int] = []
        uses: list[int] = []
        for op, role in zip(self.ops, roles):
            t = type(op)
            if t is Reg:
                if role & DEF:
                    defs.append(op.v)
                    if op.comp:
                        uses.append(op.v)
                if role & USE:
                    uses.append(op.v)
            elif t is Mem:
                base = op.base
                if type(base) is Reg:
                    uses.append(base.v)
                for it in op.rest:
                    uses.extend(r.v for r in it.regs())
            elif role and t is not Imm and t is not Sym:
                for r in op.regs():
                    if role & DEF:
                        defs.append(r.v)
                        if r.comp:
                            uses.append(r.v)
                    if role & USE:
                        uses.append(r.v)
        if self.guard >= 0:
            uses.append(self.guard)
        uses.extend(self.implicit_uses)
        self.defs = tuple(defs) if len(defs) < 2 else tuple(dict.fromkeys(defs))
        self.uses = tuple(uses) if len(uses) < 2 else tuple(dict.fromkeys(uses))

    def render(self, name: Callable[[int], str]) -> str:
        """The instruction as PTX text (no indentation, with its ';')."""
        text = self.opcode
        if self.ops:
            text += "\t" + ", ".join(op.render(name) for op in self.ops)
        if self.guard >= 0:
            text = ("@!" if self.guard_neg else "@") + name(self.guard) + " " + text
        return text + ";"

    def copy_with(self, ops: list[Operand], guard: int | None = None) -> "Instruction":
        """A copy with other operands (same opcode, roles, line, location and comment)."""
        new = Instruction(self.opcode, ops, self.guard if guard is None else guard,
                          self.guard_neg, self.line, self.loc, self.comment)
        new.origin = self.origin
        new.known = self.known
        new.implicit_uses = self.implicit_uses
        new.set_roles(self.roles)
        new.is_copy = self.is_copy
        return new

    def __repr__(self) -> str:
        return f"<{self.render(lambda v: f'v{v}')} line {self.line}>"


class Label:
    """A label statement ``name:`` of a function body."""

    __slots__ = ("name", "line")

    def __init__(self, name: str, line: int = 0):
        self.name = name
        self.line = line

    def __repr__(self) -> str:
        return f"<label {self.name}>"


class Removed:
    """An original instruction the allocation made redundant (a copy whose ends share a
    register, the definition of a rematerialized value). Analyses ignore it; the emitter writes
    it as a ``//@removed`` comment line so the checker can account for it."""

    __slots__ = ("instr", "reason")

    def __init__(self, instr: Instruction, reason: str):
        self.instr = instr
        self.reason = reason

    def __repr__(self) -> str:
        return f"<removed ({self.reason}) {self.instr!r}>"


# Kinds of raw statements.
COMMENT, REG_DECL, LOC, SCOPE_OPEN, SCOPE_CLOSE, DIRECTIVE = range(6)


class Raw:
    """A statement kept as its source text: a comment, a ``.reg`` declaration, a ``.loc`` or
    ``.file`` line, a scope brace, or another directive (``.local``, ``.shared``, ``.param``,
    ``.pragma``, ``.callprototype``, ``.branchtargets`` ...)."""

    __slots__ = ("kind", "text", "line")

    def __init__(self, kind: int, text: str, line: int = 0):
        self.kind = kind
        self.text = text
        self.line = line

    def __repr__(self) -> str:
        return f"<raw {self.kind} {self.text!r}>"
