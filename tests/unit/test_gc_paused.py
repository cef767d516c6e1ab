"""``util.gc_paused`` (issue 16): the cyclic collector paused while objects are built, the
survivors frozen after, and the frozen cycles collected once the permanent generation has
doubled, so that a process allocating file after file keeps a bounded heap (the frozen objects
counted without walking them)."""

from __future__ import annotations

import gc
import weakref

import pytest

from ptxalloc import util


class _Node:
    def __init__(self):
        self.me = self          # a cycle: reference counting never frees it


@pytest.fixture
def collector():
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    gc.unfreeze()
    gc.collect()
    if not was:
        gc.disable()


def test_the_collector_is_paused_inside_and_back_after(collector):
    with util.gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def _cycles_made_paused(n: int) -> list:
    with util.gc_paused():
        made = [weakref.ref(_Node()) for _ in range(n)]
    util.release_frozen_cycles()
    return made


def test_frozen_cycles_are_collected_once_the_frozen_set_doubles(collector, monkeypatch):
    monkeypatch.setattr(util, "_COLLECT_FROM", 1000)
    monkeypatch.setattr(util, "_collect_above", 1)
    monkeypatch.setattr(util, "_frozen", 0)
    first = _cycles_made_paused(300)        # past the bound: collected when released
    assert all(r() is None for r in first)
    survivors = gc.get_freeze_count()
    assert util._frozen == pytest.approx(survivors, rel=0.01)
    assert util._collect_above == max(1000, 2 * util._frozen)    # twice the survivors
    second = _cycles_made_paused(300)       # the frozen set has not doubled: frozen, kept
    assert all(r() is not None for r in second)


def test_without_the_bound_frozen_cycles_stay(collector, monkeypatch):
    """The case the bound exists for: frozen, a cycle outlives every collection."""
    monkeypatch.setattr(util, "_collect_above", 10 ** 12)
    monkeypatch.setattr(util, "_frozen", 0)
    with util.gc_paused():
        node = weakref.ref(_Node())
    gc.collect()
    assert node() is not None


def test_reading_the_next_file_releases_the_last_ones_cycles(collector, monkeypatch):
    from conftest import REPO
    from ptxalloc.ptx import parse_file

    monkeypatch.setattr(util, "_COLLECT_FROM", 1000)
    monkeypatch.setattr(util, "_collect_above", 1)
    monkeypatch.setattr(util, "_frozen", 0)
    with util.gc_paused():
        last = [weakref.ref(_Node()) for _ in range(300)]
    assert all(r() is not None for r in last)     # frozen
    parse_file(str(REPO / "examples" / "saxpy_poly.ptx"))
    assert all(r() is None for r in last)
