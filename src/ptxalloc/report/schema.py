"""The header every ``--json`` report of the command line starts with (SPEC section 9; issue 14,
"one JSON schema for every command"): ``schema`` (``ptxalloc/<command>/<revision>``), the
package ``version``, the input ``file`` and the ``arch`` it was read for. docs/report-schema.md
documents every key."""

from __future__ import annotations

from .. import __version__

REVISION = 1


def header(command: str, file: str | None, arch: str | None) -> dict:
    """The header of ``command``'s JSON report; the command's own keys follow it."""
    return {"schema": schema_name(command), "version": __version__, "file": file,
            "arch": arch}


def schema_name(command: str) -> str:
    return f"ptxalloc/{command}/{REVISION}"
