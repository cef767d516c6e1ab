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


def data_files(pattern: str = "**/*.ptx") -> list[Path]:
    return sorted(DATA.glob(pattern))


def assert_verified(res) -> None:
    """Last step of a test: the checker proved every function of an allocation result."""
    assert {f.verified for f in res.functions} == {True}, \
        [(f.name, f.verified) for f in res.functions]


_NEEDS = re.compile(r":\d+: function '[^']+': '[^\n]+' needs (\d+(?:\.\d+)?) registers at once")


def assert_justified_refusal(message: str, k: int) -> None:
    """An AllocationError is acceptable only when it names an instruction needing more than K
    registers at once (SPEC section 2: some budgets are impossible)."""
    m = _NEEDS.search(message)
    assert m and float(m.group(1)) > k, f"refusal at K = {k} without an instruction too big: " \
                                        f"{message}"
