"""Module and Function: the containers the parser builds and the emitter writes back.

A :class:`Module` is the sequence of a PTX file's top-level items — raw text (``.version``,
``.target``, global declarations, comments, ``.section`` blocks, function declarations without a
body) and :class:`Function` definitions — in source order, so that emitting it reproduces the
file. A :class:`Function` keeps its header verbatim, its parsed parameters and performance
directives, its body as a list of statements, and its virtual registers in a :class:`RegTable`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .instruction import Instruction, Label, Raw
from .registers import RegTable


@dataclass
class Param:
    """One entry of a function's parameter or return list."""

    name: str
    space: str          # "param" or "reg" (old ABI register parameters)
    ptype: str          # ".b32", ".u64", ".b8" ...
    size: int           # size in bytes (arrays included)
    align: int = 0
    vec: int = 0
    is_return: bool = False
    vid: int = -1       # for .reg parameters: the virtual register


@dataclass
class Function:
    name: str
    kind: str                                  # "entry" or "func"
    header: str                                # source text up to (not including) the body '{'
    line: int = 0
    linkage: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    returns: list[Param] = field(default_factory=list)
    directives: dict[str, object] = field(default_factory=dict)
    body: list = field(default_factory=list)   # Instruction | Label | Raw
    regs: RegTable = field(default_factory=RegTable)
    branch_targets: dict[str, list[str]] = field(default_factory=dict)
    filename: str = "<input>"

    @property
    def is_entry(self) -> bool:
        return self.kind == "entry"

    def instructions(self) -> list[Instruction]:
        return [s for s in self.body if type(s) is Instruction]

    def labels(self) -> list[Label]:
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


@dataclass
class Module:
    items: list = field(default_factory=list)      # Raw | Function, in source order
    filename: str = "<input>"
    version: str = ""
    target: list[str] = field(default_factory=list)
    address_size: int = 64
    warnings: list = field(default_factory=list)    # Diagnostic, in source order

    @property
    def functions(self) -> list[Function]:
        return [it for it in self.items if type(it) is Function]

    def function(self, name: str) -> Function | None:
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
