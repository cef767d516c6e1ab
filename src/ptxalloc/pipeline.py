"""Allocating a whole module: every function (or the one asked for) in turn, the allocated
functions written back into the module's text, each allocation checked (SPEC sections 8, 9)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .alloc.driver import FunctionResult, Options, allocate_function
from .errors import UsageError
from .ir.instruction import Raw
from .ir.module import Module
from .ptx import emit_function, emit_module
from .ptx.parser import parse
from .target.sm import SMProfile, profile_for


@dataclass
class ModuleResult:
    ptx: str
    functions: list[FunctionResult] = field(default_factory=list)
    sm: SMProfile | None = None

    def report(self) -> dict:
        return {"functions": [f.report() for f in self.functions]}


def allocate_module(module: Module, registers: int = 15, allocator: str = "briggs",
                    arch: str | None = None, function: str | None = None,
                    verify: bool = True, options: Options | None = None) -> ModuleResult:
    sm = profile_for(arch, module.sm)
    options = options or Options(allocator=allocator)
    options.allocator = allocator
    fns = module.functions
    if function is not None:
        fns = [f for f in fns if f.name == function]
        if not fns:
            raise UsageError(f"{module.filename}: no function named '{function}'")
    results = []
    texts = {}
    decls = [it.text for it in module.items if type(it) is Raw]
    for fn in fns:
        res = allocate_function(fn, sm, registers, options, decls)
        res.text = emit_function(res.function, res.names.__getitem__)
        texts[fn.name] = res.text
        results.append(res)
    text = emit_module(module, texts)
    if verify:
        from .verify import verify_module_text
        verify_module_text(module, text, results)
    return ModuleResult(text, results, sm)


def allocate(ptx_text: str, registers: int = 15, allocator: str = "briggs",
             arch: str | None = None, function: str | None = None, verify: bool = True,
             filename: str = "<input>") -> ModuleResult:
    """Allocate PTX text; returns the allocated PTX (``.ptx``) and the per-function report
    (``.report()``)."""
    return allocate_module(parse(ptx_text, filename), registers, allocator, arch, function,
                           verify)
