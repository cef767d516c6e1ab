"""ptxalloc.records: ``@record`` behaves as ``@dataclass`` on the class bodies the project writes
(issue 16: the start-up path's records without dataclasses)."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
from hypothesis import given, strategies as st

from ptxalloc.records import FrozenRecordError, field, record, replace


def _pair(frozen=False, slots=False):
    """The same class body as a dataclass and as a record."""
    def body():
        class Point:
            """A point."""

            x: int
            y: int = 0
            tags: list[str] = dataclasses.field(default_factory=list)
            note: str | None = dataclasses.field(default=None, repr=False)

            def norm(self) -> int:
                return abs(self.x) + abs(self.y)
        return Point

    def record_body():
        class Point:
            """A point."""

            x: int
            y: int = 0
            tags: list[str] = field(default_factory=list)
            note: str | None = field(default=None, repr=False)

            def norm(self) -> int:
                return abs(self.x) + abs(self.y)
        return Point

    return (dataclasses.dataclass(frozen=frozen, slots=slots)(body()),
            record(frozen=frozen, slots=slots)(record_body()))


# the records at module level, under names pickle can find
_PAIRS = {}
for _frozen in (False, True):
    for _slots in (False, True):
        _d, _r = _PAIRS[_frozen, _slots] = _pair(_frozen, _slots)
        _r.__name__ = _r.__qualname__ = f"Point{int(_frozen)}{int(_slots)}"
        globals()[_r.__name__] = _r


@pytest.mark.parametrize("frozen,slots", [(False, False), (True, False), (False, True),
                                          (True, True)])
@given(x=st.integers(), y=st.integers(), tags=st.lists(st.text(max_size=3), max_size=3),
       note=st.none() | st.text(max_size=3), use_keywords=st.booleans())
def test_record_matches_dataclass(frozen, slots, x, y, tags, note, use_keywords):
    D, R = _PAIRS[frozen, slots]
    tags = tuple(tags) if frozen else tags      # hashable fields where the record hashes
    args, kwargs = ((), dict(x=x, y=y, tags=tags, note=note)) if use_keywords else \
        ((x, y, tags, note), {})
    d, r = D(*args, **kwargs), R(*args, **kwargs)
    # the same text after the class's name (the record's is renamed for pickle)
    assert repr(r)[repr(r).index("("):] == repr(d)[repr(d).index("("):]
    assert (r.x, r.y, r.tags, r.note, r.norm()) == (d.x, d.y, d.tags, d.note, d.norm())
    assert r == R(*args, **kwargs) and (r == R(x + 1, y)) == (d == D(x + 1, y))
    assert r != d       # another class, as two dataclasses of different classes
    assert (D.__hash__ is None) == (R.__hash__ is None)
    if frozen:
        assert hash(r) == hash(R(*args, **kwargs)) == hash(d)
        with pytest.raises(AttributeError):
            r.x = 1
        with pytest.raises(FrozenRecordError):
            del r.y
    else:
        r.x = x + 1
        assert r.x == x + 1
    assert hasattr(r, "__dict__") == hasattr(d, "__dict__") == (not slots)
    for other in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
        assert other == r and other is not r
    assert replace(r, y=7) == R(r.x, 7, r.tags, r.note)
    assert replace(r, y=7).y == dataclasses.replace(d, y=7).y == 7


def test_defaults_are_per_instance_and_class_attributes_as_dataclass():
    D, R = _pair()
    a, b = R(1), R(2)
    a.tags.append("t")
    assert b.tags == []
    assert R.y == D.y == 0 and R.note is None and D.note is None
    assert not hasattr(R, "tags") and not hasattr(D, "tags")
    with pytest.raises(TypeError):
        R()                                     # x is required
    with pytest.raises(TypeError):
        replace(R(1), z=3)                      # no such field


def test_methods_the_body_writes_are_kept():
    @record(frozen=True)
    class Named:
        name: str
        size: int = 0

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __hash__(self) -> int:
            return 7

    assert repr(Named("a")) == "<a>" and hash(Named("a", 3)) == 7
    assert Named("a", 1) == Named("a", 1) != Named("a", 2)


def test_refused_bodies_as_dataclass():
    with pytest.raises(ValueError, match="mutable default"):
        @record
        class Bad:
            items: list = []
    with pytest.raises(TypeError, match="follows default"):
        @record
        class Order:
            a: int = 0
            b: int
    with pytest.raises(ValueError):
        field(default=1, default_factory=int)
    _, base = _PAIRS[False, False]
    with pytest.raises(TypeError, match="not inherited"):
        @record
        class Derived(base):
            z: int = 0


def test_start_up_records_are_not_dataclasses():
    """The classes an allocate of a small file builds are records: no dataclass is made on that
    path, so ``dataclasses`` (and ``inspect``) are not imported (tests/unit/test_startup.py)."""
    from ptxalloc.alloc.driver import FunctionResult, Options
    from ptxalloc.target.sm import PROFILES

    assert not dataclasses.is_dataclass(FunctionResult)
    o = Options()
    assert replace(o, allocator="linear").allocator == "linear" and o.allocator == "briggs"
    sm = next(iter(PROFILES.values()))
    assert hash(sm) == hash(replace(sm)) and sm == replace(sm)


def test_every_record_class_of_the_package_has_its_fields():
    """Every ``@record`` class in ``src/ptxalloc`` read its annotated fields: a record left
    with none (annotations not found, as a reading of the class ``__dict__`` gives from
    Python 3.14) would compare every instance equal."""
    import importlib
    import pkgutil
    import re

    import ptxalloc

    found = 0
    for info in pkgutil.walk_packages(ptxalloc.__path__, "ptxalloc."):
        spec = importlib.util.find_spec(info.name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        text = open(spec.origin, encoding="utf-8").read()
        names = re.findall(r"^@record(?:\(.*\))?\nclass (\w+)", text, re.M)
        if not names:
            continue
        module = importlib.import_module(info.name)
        for name in names:
            assert getattr(module, name)._fields, f"{info.name}.{name}"
            found += 1
    assert found >= 20


def test_init_is_compiled_on_the_first_construction():
    """A record's ``__init__`` is compiled when the class is first constructed (issue 16: a
    record a run never constructs costs no compile), then is the compiled one: the same
    parameters, defaults and refusals as the dataclass of the same body, from the first call on."""
    import inspect

    for frozen, slots in ((False, False), (True, True)):
        dc, rec = _pair(frozen, slots)
        stand_in = rec.__init__
        with pytest.raises(TypeError) as refused:
            rec()                                   # the first call refuses as the real one
        assert "missing 1 required positional argument: 'x'" in str(refused.value)
        assert rec.__init__ is not stand_in         # compiled by that first call
        compiled = rec.__init__
        ours = inspect.signature(compiled).parameters
        theirs = inspect.signature(dc.__init__).parameters
        assert list(ours) == list(theirs) == ["self", "x", "y", "tags", "note"]
        assert [ours[n].default for n in ("y", "note")] == [0, None]
        assert rec(1, 2) == rec(x=1, y=2) and rec.__init__ is compiled
        assert repr(rec(3)) == repr(dc(3)).replace(dc.__qualname__, rec.__qualname__)
