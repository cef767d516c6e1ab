"""Source locations: the ``.file`` table of a module and the ``.loc`` of an instruction as file
name, line, column and the call it was inlined into (PTX ISA 9.0, 11.6.1 ``.file`` and 11.6.2 ``.loc``; the
"per source line" view of SPEC section 9).

The parser keeps an instruction's ``.loc`` as ``(file index, line, column, inlined_at)``; the
``.file`` directives that name the indices usually come after the functions (nvcc and Triton
write them at the end), so names are resolved here, once the whole module is read. An index no
``.file`` names is shown as ``file#N``.
"""

from __future__ import annotations

import re

from ..ir.instruction import Raw

# a text, compiled by re on the first .file directive (start-up, issue 16)
_FILE = r'\.file\s+(\d+)\s+"([^"]*)"'


def source_files(module) -> dict[int, str]:
    """``{file index: file name}`` from the module's ``.file`` directives."""
    files: dict[int, str] = {}
    for it in module.items:
        if type(it) is Raw and it.text.startswith(".file"):
            m = re.match(_FILE, it.text)
            if m:
                files[int(m.group(1))] = m.group(2)
    return files


def _name(files: dict[int, str], index: int) -> str:
    return files.get(index) or f"file#{index}"


def source_of(loc, files: dict[int, str]) -> dict | None:
    """An instruction's location as JSON: ``{"file", "line", "column"}`` and, for inlined code,
    ``"inlined_at"``: a one-element list, the location of the call it was inlined into (a
    ``.loc`` carries one level; the list leaves room for deeper chains). None without
    ``.loc``."""
    if loc is None:
        return None
    out = {"file": _name(files, loc[0]), "line": loc[1],
           "column": loc[2] if len(loc) > 2 else 0}
    inlined = loc[3] if len(loc) > 3 else None
    if inlined is not None:
        out["inlined_at"] = [{"file": _name(files, inlined[0]), "line": inlined[1],
                              "column": inlined[2]}]
    return out


def short_name(path: str) -> str:
    """The last component of a file path (for text reports)."""
    return path.rsplit("/", 1)[-1]


def format_source(src: dict | None, full: bool = False) -> str:
    """``kernel.cu:24:16`` (``inlined at kernel.cu:144:9`` appended for inlined code); the file
    as its last path component unless ``full``."""
    if src is None:
        return "-"
    name = src["file"] if full else short_name(src["file"])
    text = f"{name}:{src['line']}" + (f":{src['column']}" if src.get("column") else "")
    for at in src.get("inlined_at", ()):
        an = at["file"] if full else short_name(at["file"])
        text += f" (inlined at {an}:{at['line']}" + (f":{at['column']})" if at["column"] else ")")
    return text
