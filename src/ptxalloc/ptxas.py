"""Running NVIDIA's ``ptxas`` beside ptxalloc: does a PTX text assemble, and what does
``ptxas -v`` report per function (registers, spill bytes, stack frame, compile time)?

Used by the conformance tests and the benchmarks, never by the allocator itself. Everything here
degrades to "not available" when ptxas is not on the PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

_COMPILING = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_TIME = re.compile(r"Compile time = ([\d.]+) ms")


@dataclass
class FunctionFigures:
    name: str
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack: int | None = None
    smem: int = 0                   # "N bytes smem" on the "Used" line (static shared memory)
    compile_ms: float | None = None


@dataclass
class PtxasResult:
    ok: bool
    seconds: float
    output: str
    functions: dict[str, FunctionFigures] = field(default_factory=dict)


def available() -> bool:
    return shutil.which("ptxas") is not None


def arch_for(target: str | None) -> str:
    """The ``-arch`` to assemble for: the module's target, or sm_90 for targets older than
    sm_75 (which ptxas 13 no longer accepts), as the corpus MANIFEST does."""
    if not target or not target.startswith("sm_"):
        return "sm_90"
    digits = re.match(r"sm_(\d+)", target)
    if digits is None or int(digits.group(1)) < 75:
        return "sm_90"
    return target


def parse_verbose(output: str) -> dict[str, FunctionFigures]:
    """Per-function figures from the output of ``ptxas -v``."""
    funcs: dict[str, FunctionFigures] = {}
    cur: FunctionFigures | None = None
    for line in output.splitlines():
        m = _COMPILING.search(line) or _PROPS.search(line)
        if m:
            name = m.group(1)
            cur = funcs.setdefault(name, FunctionFigures(name))
            continue
        if cur is None:
            continue
        m = _FRAME.search(line)
        if m:
            cur.stack, cur.spill_stores, cur.spill_loads = (int(x) for x in m.groups())
            continue
        m = _USED.search(line)
        if m:
            cur.registers = int(m.group(1))
            sm = _SMEM.search(line)
            if sm:
                cur.smem = int(sm.group(1))
            continue
        m = _TIME.search(line)
        if m:
            cur.compile_ms = float(m.group(1))
    return funcs


def assemble(ptx: str, arch: str, extra: list[str] | None = None,
             timeout: float = 600) -> PtxasResult:
    """Assemble PTX text with ``ptxas -v -arch=<arch>``; the cubin is thrown away."""
    with tempfile.TemporaryDirectory(prefix="ptxalloc-ptxas-") as tmp:
        src = os.path.join(tmp, "in.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        return assemble_file(src, arch, extra, timeout)


def assemble_file(path: str, arch: str, extra: list[str] | None = None,
                  timeout: float = 600) -> PtxasResult:
    cmd = ["ptxas", "-v", f"-arch={arch}", path, "-o", os.devnull] + (extra or [])
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return PtxasResult(False, time.perf_counter() - t0, "ptxas timed out")
    seconds = time.perf_counter() - t0
    out = proc.stdout + proc.stderr
    return PtxasResult(proc.returncode == 0, seconds, out, parse_verbose(out))
