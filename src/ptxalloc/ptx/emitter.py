"""Module to PTX text (SPEC section 8).

Raw statements (directives, declarations, ``.loc`` lines, comments) are written back verbatim,
labels as ``name:``, instructions from their opcode and operands with register names supplied by
a naming function — the declared names for an unmodified function, physical names for an
allocated one. For an unmodified module the result is the input up to whitespace (and the
fresh names the parser gives a label name defined again in another ``{ }`` block).
"""

from __future__ import annotations

from typing import Callable, Iterable

from ..ir.instruction import SCOPE_CLOSE, SCOPE_OPEN, Instruction, Label, Removed
from ..ir.module import Function, Module


def emit_body(body: Iterable, name: Callable[[int], str], out: list[str]) -> None:
    """Append the lines of a function body to ``out``."""
    indent = 1
    for s in body:
        t = type(s)
        if t is Instruction:
            out.append("\t" * indent + s.render(name))
            if s.comment:
                out[-1] += "\t" + s.comment
        elif t is Label:
            out.append(s.name + ":")
        elif t is Removed:
            out.append("\t" * indent + "//@removed " + s.instr.render(name))
        else:
            k = s.kind
            if k == SCOPE_OPEN:
                out.append("\t" * indent + "{")
                indent += 1
            elif k == SCOPE_CLOSE:
                indent -= 1
                out.append("\t" * indent + "}")
            else:
                out.append("\t" * indent + s.text)


def emit_function(fn: Function, name: Callable[[int], str] | None = None,
                  body: Iterable | None = None) -> str:
    """PTX text of one function definition; ``name`` maps register ids to names (the declared
    names by default) and ``body`` replaces the function's own statements."""
    if name is None:
        name = fn.regs.names.__getitem__
    out = [fn.header, "{"]
    emit_body(fn.body if body is None else body, name, out)
    out.append("}")
    return "\n".join(out) + "\n"


def emit_module(module: Module, functions: dict[str, str] | None = None) -> str:
    """PTX text of a module; ``functions`` maps function names to replacement text."""
    out: list[str] = []
    for item in module.items:
        if type(item) is Function:
            if functions is not None and item.name in functions:
                out.append("\n" + functions[item.name] + "\n")
            else:
                out.append("\n" + emit_function(item) + "\n")
        else:
            out.append(item.text + "\n")
    return "".join(out)
