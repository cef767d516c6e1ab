"""Function names as users write them (issue 14, "Small things"): ``--function`` accepts the
PTX (mangled) name, the demangled name with or without its parameter list, or a substring of
either that names one function.

Demangling uses GNU ``c++filt`` (binutils) through one subprocess when it is on the PATH; the
pure-Python ``itanium_demangler`` on PyPI installs as a wheel but has had no release since 2022,
so it is not used. Without ``c++filt`` only the PTX names (and their substrings) match.
"""

from __future__ import annotations

import shutil
import subprocess

from .errors import UsageError


def demangle_all(names: list[str]) -> dict[str, str]:
    """``{name: demangled}`` for the names ``c++filt`` demangles (others are left out); empty
    without ``c++filt``."""
    tool = shutil.which("c++filt")
    mangled = [n for n in names if n.startswith("_Z")]
    if tool is None or not mangled:
        return {}
    try:
        done = subprocess.run([tool], input="\n".join(mangled) + "\n", capture_output=True,
                              text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return {}
    out = done.stdout.splitlines()
    if len(out) != len(mangled):
        return {}
    return {m: d for m, d in zip(mangled, out) if d != m}


def resolve_function(names: list[str], query: str, filename: str) -> str:
    """The one PTX function name ``query`` means: an exact PTX name, else an exact demangled
    name (with or without its parameters), else the one name either contains ``query``.
    An unknown or ambiguous query is a usage error listing the candidates."""
    if query in names:
        return query
    demangled = demangle_all(names)
    exact = [n for n, d in demangled.items() if query in (d, d.split("(", 1)[0])]
    if len(exact) == 1:
        return exact[0]
    matches = exact or [n for n in names if query in n or query in demangled.get(n, "")]
    if len(matches) == 1:
        return matches[0]

    def shown(n: str) -> str:
        return f"{n} ({demangled[n]})" if n in demangled else n

    if matches:
        raise UsageError(f"{filename}: '{query}' matches {len(matches)} functions: "
                         + "; ".join(shown(n) for n in matches[:20]))
    raise UsageError(f"{filename}: no function named '{query}' (functions: "
                     + "; ".join(shown(n) for n in names[:20]) + ")")
