"""Module and Function: the containers the parser builds and the emitter writes back.

A :class:`Module` is the sequence of a PTX file's top-level items — raw text (``.version``,
``.target``, global declarations, comments, ``.section`` blocks, function declarations without a
body) and :class:`Function` definitions — in source order, so that emitting it reproduces the
file. A :class:`Function` keeps its header verbatim, its parsed parameters and performance
directives, its body as a list of statements, and its virtual registers in a :class:`RegTable`.

They are plain classes, not dataclasses: importing :mod:`dataclasses` (with :mod:`inspect`) cost
every command's start-up, ``parse`` included (issue 16). :class:`_Record` gives them the
field-wise ``==`` and ``repr`` a dataclass has.
"""

from __future__ import annotations

from .instruction import Instruction, Label, Raw
from .registers import RegTable


class _Record:
    """Field-wise equality and repr over ``_fields``."""

    _fields: tuple[str, ...] = ()
    __hash__ = None  # mutable and compared by value: unhashable

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"


class Param(_Record):
    """One entry of a function's parameter or return list."""

    _fields = ("name", "space", "ptype", "size", "align", "vec", "is_return", "vid")

    def __init__(self, name: str, space: str, ptype: str, size: int, align: int = 0,
                 vec: int = 0, is_return: bool = False, vid: int = -1):
        self.name = name
        self.space = space      # "param" or "reg" (old ABI register parameters)
        self.ptype = ptype      # ".b32", ".u64", ".b8" ...
        self.size = size        # size in bytes (arrays included)
        self.align = align
        self.vec = vec
        self.is_return = is_return
        self.vid = vid          # for .reg parameters: the virtual register


class Function(_Record):
    """One ``.entry`` (kind "entry") or ``.func`` (kind "func") with a body: its header text,
    parameters, performance directives, body statements (Instruction, Label, Raw), virtual
    registers and ``.branchtargets`` lists."""

    _fields = ("name", "kind", "header", "line", "linkage", "params", "returns", "directives",
               "body", "regs", "branch_targets", "filename")

    def __init__(self, name: str, kind: str, header: str, line: int = 0,
                 linkage: list[str] | None = None, params: list[Param] | None = None,
                 returns: list[Param] | None = None, directives: dict[str, object] | None = None,
                 body: list | None = None, regs: RegTable | None = None,
                 branch_targets: dict[str, list[str]] | None = None,
                 filename: str = "<input>"):
        self.name = name
        self.kind = kind                       # "entry" or "func"
        self.header = header                   # source text up to (not including) the body '{'
        self.line = line
        self.linkage = [] if linkage is None else linkage
        self.params = [] if params is None else params
        self.returns = [] if returns is None else returns
        self.directives = {} if directives is None else directives
        self.body = [] if body is None else body      # Instruction | Label | Raw
        self.regs = RegTable() if regs is None else regs
        self.branch_targets = {} if branch_targets is None else branch_targets
        self.filename = filename

    @property
    def is_entry(self) -> bool:
        """Whether this is a kernel (``.entry``)."""
        return self.kind == "entry"

    def instructions(self) -> list[Instruction]:
        """The body's instructions, in order."""
        return [s for s in self.body if type(s) is Instruction]

    def labels(self) -> list[Label]:
        """The body's labels, in order."""
        return [s for s in self.body if type(s) is Label]

    def copy(self) -> "Function":
        """A copy whose body list and register table can be changed without touching this one
        (instructions are shared: rewrite them with ``copy_with``)."""
        new = Function(self.name, self.kind, self.header, self.line, list(self.linkage),
                       list(self.params), list(self.returns), dict(self.directives),
                       list(self.body), self.regs.copy(), dict(self.branch_targets),
                       self.filename)
        return new

    def reordered(self, order: list[int]) -> "Function":
        """A copy whose k-th instruction is this one's ``order[k]``-th; every other statement
        keeps its place (a schedule: ``ptxalloc.passes.schedule``)."""
        instrs = self.instructions()
        new = self.copy()
        it = iter(order)
        new.body = [instrs[next(it)] if type(s) is Instruction else s for s in self.body]
        return new


class Module(_Record):
    """A parsed PTX file: its top-level items (Raw text and Function definitions) in source
    order, with its ``.version``, ``.target``, address size and the parser's warnings."""

    _fields = ("items", "filename", "version", "target", "address_size", "warnings")

    def __init__(self, items: list | None = None, filename: str = "<input>", version: str = "",
                 target: list[str] | None = None, address_size: int = 64,
                 warnings: list | None = None):
        self.items = [] if items is None else items          # Raw | Function, in source order
        self.filename = filename
        self.version = version
        self.target = [] if target is None else target
        self.address_size = address_size
        self.warnings = [] if warnings is None else warnings  # Diagnostic, in source order

    @property
    def functions(self) -> list[Function]:
        """The function definitions, in source order."""
        return [it for it in self.items if type(it) is Function]

    def declarations(self) -> list[str]:
        """The texts of the module-scope items that are not functions (directives, variables)."""
        return [it.text for it in self.items if type(it) is not Function]

    def function(self, name: str) -> Function | None:
        """The function called ``name``, or None."""
        for f in self.functions:
            if f.name == name:
                return f
        return None

    def without(self, names: set[str]) -> Module:
        """The module less the functions named (declarations and other functions kept)."""
        return Module([it for it in self.items if not (type(it) is Function and it.name in names)],
                      self.filename, self.version, list(self.target), self.address_size)

    @property
    def sm(self) -> str | None:
        """The first ``sm_XX`` of the ``.target`` directive, if any."""
        for t in self.target:
            if t.startswith("sm_"):
                return t
        return None


__all__ = ["Module", "Function", "Param", "Instruction", "Label", "Raw"]
