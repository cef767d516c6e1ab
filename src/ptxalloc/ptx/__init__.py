"""PTX text in and out: :mod:`.parser` reads a PTX file into a ``Module`` (SPEC section 3; errors
as ``file:line:column: message``), :mod:`.emitter` writes a module back as text (SPEC section 8),
an allocated function with its physical register names."""

from .emitter import emit_function, emit_module
from .parser import parse, parse_file

__all__ = ["parse", "parse_file", "emit_module", "emit_function"]
