"""The static shared memory a function takes per block, for occupancy (seed 004 "Spilling
Overview": SMEM is shared by the block; the CUDA Occupancy Calculator's
``cudaOccMaxBlocksPerSMSmemLimit``, :mod:`ptxalloc.target.occupancy`).

A block gets the ``.shared`` variables its kernel declares and the module-scope ones its
instructions name (``extern`` dynamic arrays take no static bytes: their size is the launch's).
The figure is a lower bound of what ptxas counts: it leaves out the padding alignment may add
between variables and the variables of the ``.func`` a kernel calls.
"""

from __future__ import annotations

import re

from ..ir.instruction import DIRECTIVE, Raw
from ..ir.module import Function
from ..ir.operands import Args, Mem, Neg, Not, Pair, Sum, Sym, Vec

# a text, compiled by re on first use: only a function with .shared declarations reads it
# (start-up, issue 16)
_SHARED_DECL = (r"\.shared\s+(?:\.align\s+\d+\s+)?(?:\.v(\d)\s+)?\.[a-z]+(\d+)\s+"
                r"([\w$%.]+)((?:\s*\[\s*\d+\s*\])*)\s*[;=]")


def own_static_shared(fn: Function, module_decls: list[str]) -> int:
    """The bytes of static ``.shared`` memory ``fn`` declares itself or names from the module
    (module docstring)."""
    own = [s.text for s in fn.body if type(s) is Raw and s.kind == DIRECTIVE]
    module = [t for t in module_decls if ".shared" in t]
    if not module and not any(".shared" in t for t in own):
        return 0
    used = symbols_named(fn) if module else set()
    total = 0
    for text, mine in [(t, True) for t in own] + [(t, False) for t in module]:
        text = " ".join(text.split())
        if text.startswith(("extern", ".extern")):
            continue
        m = re.match(_SHARED_DECL, text.replace(".visible ", "").replace(".weak ", ""))
        if m is None:
            continue
        if not mine and m.group(3) not in used:
            continue
        size = int(m.group(2)) // 8 * int(m.group(1) or 1)
        for n in re.findall(r"\d+", m.group(4)):
            size *= int(n)
        total += size
    return total


def symbols_named(fn: Function) -> set[str]:
    """The symbols ``fn``'s instructions name (operands, addresses, their parts)."""
    out: set[str] = set()
    stack = [op for ins in fn.instructions() for op in ins.ops]
    while stack:
        op = stack.pop()
        t = type(op)
        if t is Sym:
            out.add(op.text)
        elif t is Mem:
            if op.base is not None:
                stack.append(op.base)
            stack.extend(op.rest)
        elif t is Vec or t is Args:
            stack.extend(op.items)
        elif t is Pair:
            stack += (op.a, op.b)
        elif t is Sum or t is Not or t is Neg:
            stack.append(op.reg)
    return out
