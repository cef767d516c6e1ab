"""ptxalloc for Triton kernels (SPEC section 9's report, for autotuning): given a compiled
Triton kernel (anything with ``asm["ptx"]``) or its PTX text, the ``analyze`` report of each
function and whether an allocation to a register count would spill, so that configurations can
be pruned before ptxas runs. Triton itself is not needed (``pip install ptxalloc[triton]``
brings it for compiling kernels).
"""

from __future__ import annotations


def ptx_of(kernel) -> str:
    """The PTX of a compiled Triton kernel, or the text itself."""
    if isinstance(kernel, str):
        return kernel
    try:
        return kernel.asm["ptx"]
    except (AttributeError, KeyError, TypeError):
        raise TypeError("expected a compiled Triton kernel (with asm['ptx']) or PTX text") \
            from None


def report(kernel, arch: str | None = None, block: int | None = None,
           lines: bool = False) -> list[dict]:
    """``analyze``'s JSON rows (one per function) for the kernel, at ptxas's register limit;
    ``block`` overrides the threads per block (Triton writes ``.reqntid``)."""
    from .analysis import analyze_function
    from .analysis.sources import source_files
    from .analysis.static_shared import own_static_shared
    from .target.register_limit import fixed_budgets
    from .ptx import parse
    from .report.analysis_report import function_row
    from .target.sm import profile_for_module

    module = parse(ptx_of(kernel), "<triton>")
    sm = profile_for_module(arch, module)
    budgets = fixed_budgets(module, sm, None)
    files = source_files(module)
    decls = module.declarations()
    return [function_row(analyze_function(fn, sm), sm, budgets[fn.name].registers,
                         budget_from=budgets[fn.name].source, files=files, lines=lines,
                         block=block, static_shared=own_static_shared(fn, decls))
            for fn in module.functions]


def would_spill(kernel, registers: int, arch: str | None = None) -> bool:
    """Whether allocating every function of the kernel to ``registers`` registers spills
    (stores to ``.local`` or recomputes values): the Briggs allocator is run, without the
    checker (nothing is written)."""
    from .pipeline import allocate

    res = allocate(ptx_of(kernel), registers=registers, arch=arch, verify=False,
                   filename="<triton>")
    return any(f.spill_stores_bytes or f.spilled_values for f in res.functions)
