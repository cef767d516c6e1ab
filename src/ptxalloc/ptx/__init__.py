"""PTX text in and out: the parser and the emitter."""

from .emitter import emit_function, emit_module
from .parser import parse, parse_file

__all__ = ["parse", "parse_file", "emit_module", "emit_function"]
