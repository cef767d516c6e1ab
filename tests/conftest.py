"""Shared test fixtures: where the corpus and the project's own PTX live."""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"

# the commands tests start as a user would (``python -m ptxalloc ...``) run this checkout's
# sources, installed or not (pyproject's pythonpath covers only pytest's own process)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO / "src")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def corpus_root() -> Path | None:
    """``../shared/corpus`` beside the checkout (or $PTXALLOC_CORPUS); None when absent."""
    env = os.environ.get("PTXALLOC_CORPUS")
    root = Path(env) if env else REPO.parent / "shared" / "corpus"
    return root if (root / "MANIFEST.json").is_file() else None


@lru_cache(maxsize=1)
def manifest() -> list[dict]:
    root = corpus_root()
    if root is None:
        return []
    return json.loads((root / "MANIFEST.json").read_text())["files"]


def corpus_files(ok_only: bool = True) -> list[dict]:
    """Manifest entries of the corpus files (those ptxas accepts, by default)."""
    return [f for f in manifest() if f["ptxas"]["ok"] or not ok_only]


def corpus_params(ok_only: bool = True):
    """pytest parameters over the corpus files, or one skipped parameter when it is absent."""
    files = corpus_files(ok_only)
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/corpus is absent"))]
    return [pytest.param(f, id=f["path"]) for f in files]


def corpus_module(path: str):
    """The corpus file ``path`` (relative to the corpus root) parsed, and the ``-arch`` ptxas
    takes it with (MANIFEST.json); the test is skipped where the corpus is absent."""
    from ptxalloc.ptx import parse_file
    root = corpus_root()
    if root is None:
        pytest.skip("../shared/corpus is absent")
    arch = next(e["ptxas_arch"] for e in manifest() if e["path"] == path)
    return parse_file(str(root / path)), arch


def data_files(pattern: str = "**/*.ptx") -> list[Path]:
    return sorted(DATA.glob(pattern))


def assert_verified(res) -> None:
    """Last step of a test: the checker proved every function of an allocation result."""
    assert {f.verified for f in res.functions} == {True}, \
        [(f.name, f.verified) for f in res.functions]


def assert_chain_proven_and_assembles(module, res, arch: str) -> None:
    """Last steps of a pre-pass corpus test: the allocation ``res`` of ``module`` proven from the
    original through every pass record it carries (what ``ptxalloc verify ORIGINAL ALLOCATED``
    does), then assembled by ptxas (skipped, after the proof, where ptxas is absent)."""
    from ptxalloc import ptxas
    from ptxalloc.verify import parse_allocated, verify_modules
    verify_modules(module, parse_allocated(res.ptx, "allocated.ptx"))
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    out = ptxas.assemble(res.ptx, arch)
    assert out.ok, out.output


_NEEDS = re.compile(r":\d+: function '[^']+': '[^\n]+' needs (\d+(?:\.\d+)?) registers at once")


def assert_justified_refusal(message: str, k: int) -> None:
    """An AllocationError is acceptable only when it names an instruction needing more than K
    registers at once (SPEC section 2: some budgets are impossible)."""
    m = _NEEDS.search(message)
    assert m and float(m.group(1)) > k, f"refusal at K = {k} without an instruction too big: " \
                                        f"{message}"
