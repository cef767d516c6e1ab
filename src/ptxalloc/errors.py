"""The project's own exceptions.

Every error a user can cause (bad PTX, an impossible budget, a frame that is too large, an
allocation the checker refutes) is one of these, with a message that names where and what.
The command line prints ``str(error)`` on one line and exits non-zero; a traceback on bad input
is a bug.
"""

from __future__ import annotations


class PtxallocError(Exception):
    """Base class of every error ptxalloc reports to its user."""

    exit_code = 2


class PtxSyntaxError(PtxallocError):
    """Malformed PTX: carries file, line, column and a caret snippet of the offending line."""

    def __init__(self, message: str, filename: str = "<input>", line: int = 0, column: int = 0,
                 source_line: str = ""):
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.source_line = source_line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.filename}:{self.line}:{self.column}" if self.line else self.filename
        return f"{where}: syntax error: {self.message}"

    def snippet(self) -> str:
        """The offending line with a caret under the column."""
        if not self.source_line:
            return ""
        text = self.source_line.expandtabs(1)
        return f"{text}\n{' ' * max(self.column - 1, 0)}^"


class Diagnostic:
    """A warning about suspicious PTX (a duplicate label, an unknown opcode...): collected by
    the parser in ``Module.warnings``, printed by the command line, an error under
    ``--strict``. ``line`` 0 means the whole file."""

    __slots__ = ("message", "filename", "line", "column", "source_line")

    def __init__(self, message: str, filename: str = "<input>", line: int = 0, column: int = 0,
                 source_line: str = ""):
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.source_line = source_line

    def __str__(self) -> str:
        where = f"{self.filename}:{self.line}:{self.column}" if self.line else self.filename
        return f"{where}: warning: {self.message}"

    def __repr__(self) -> str:
        return f"Diagnostic({str(self)!r})"

    def as_error(self) -> PtxSyntaxError:
        """The same finding as a syntax error (``--strict``)."""
        return PtxSyntaxError(self.message, self.filename, self.line, self.column,
                              self.source_line)


class AllocationError(PtxallocError):
    """A request no allocation can satisfy (a budget below one instruction's needs, a frame over
    64 KB, an unknown knob); the message names the function and instruction."""


class VerificationError(PtxallocError):
    """The independent checker found an allocation wrong; the message names function,
    instruction, operand, the value expected and what the location holds instead."""

    exit_code = 1


class UsageError(PtxallocError):
    """A command-line or API argument that makes no sense (unknown function, bad budget)."""


class InternalError(PtxallocError):
    """ptxalloc found its own result wrong (an allocation over its budget, an allocation its
    own checker refutes): a bug to report, never the input's fault. Exit status 3 unless
    given (``allocate`` exits 1 when its proof fails)."""

    exit_code = 3

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return f"internal error: {self.args[0]}"
