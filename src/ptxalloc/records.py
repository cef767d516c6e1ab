"""Record classes for the modules every ``allocate`` imports, without :mod:`dataclasses`
(issue 16, speed as a user sees it: the start-up of a small file; no seed section, SPEC
section 1 only asks for a Python program).

``@record`` reads a class body as ``@dataclass`` does — annotated fields, defaults,
:func:`field` with ``default_factory`` or ``repr=False`` — and gives the class the same
``__init__`` (keyword or positional, in field order), field-wise ``==`` and ``repr``;
``frozen=True`` refuses assignment after ``__init__`` and hashes by fields, ``slots=True``
builds the class with ``__slots__``; :func:`replace` is :func:`dataclasses.replace`.

Why not dataclasses: importing them costs every run about 4.5 ms (they import :mod:`inspect`,
hence :mod:`ast`, :mod:`dis`, :mod:`tokenize`), and each ``@dataclass`` another 0.2-1 ms, since
it compiles ``__init__``, ``__repr__``, ``__eq__`` (and, frozen, ``__setattr__``,
``__delattr__``, ``__hash__``) from source: 9 ms for the 23 classes a small-file ``allocate``
imported (measured: docs/decisions.md, "Start-up of a small file"). ``@record`` compiles
``__init__`` alone (it runs at every construction, so it is the same generated code a dataclass
has), on the class's first construction (a record a run never constructs costs no compile);
equality, hash, repr and frozenness are shared functions reading the class's ``_fields``;
methods the class body writes itself are kept, as dataclasses keep them. Nothing else of
dataclasses is offered (no ``__post_init__``, ``ClassVar``,
``kw_only``, ordering, inheritance of fields): a class that needs them stays a dataclass.
"""

from __future__ import annotations

__all__ = ["field", "record", "replace", "FrozenRecordError"]


class FrozenRecordError(AttributeError):
    """Assignment to a field of a frozen record (dataclasses' ``FrozenInstanceError``)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING = _Missing()


class _Field:
    __slots__ = ("default", "default_factory", "repr")

    def __init__(self, default, default_factory, repr):
        self.default = default
        self.default_factory = default_factory
        self.repr = repr


def field(*, default=_MISSING, default_factory=_MISSING, repr: bool = True):
    """A field's default (``default``, or ``default_factory()`` called per instance) and whether
    ``repr`` shows it, as :func:`dataclasses.field`."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return _Field(default, default_factory, repr)


def record(cls=None, /, *, frozen: bool = False, slots: bool = False):
    """Make ``cls`` a record (module docstring); used as ``@record`` or ``@record(frozen=True,
    slots=True)``."""
    if cls is None:
        return lambda c: _make(c, frozen, slots)
    return _make(cls, frozen, slots)


def _make(cls, frozen: bool, slots: bool):
    if any("_repr_fields" in vars(base) for base in cls.__mro__[1:]):
        raise TypeError(f"{cls.__name__}: a record's fields are not inherited; write them all "
                        f"in one class (or use a dataclass)")
    # the class's own annotations (3.10+: never a base's); through the attribute, not the
    # class __dict__, which no longer holds them from Python 3.14 (deferred annotations)
    names = list(cls.__annotations__)
    params, body, space = [], [], {"_MISSING": _MISSING, "_set": object.__setattr__}
    shown = []
    seen_default = False
    for name in names:
        value = cls.__dict__.get(name, _MISSING)
        spec = value if type(value) is _Field else _Field(value, _MISSING, True)
        if spec.default.__class__ in (list, dict, set):
            raise ValueError(f"mutable default {type(spec.default)} for field {name} is not "
                             f"allowed: use default_factory")
        if spec.default is not _MISSING:
            seen_default = True
            space[f"_d_{name}"] = spec.default
            params.append(f"{name}=_d_{name}")
            value_text = name
        elif spec.default_factory is not _MISSING:
            seen_default = True
            space[f"_f_{name}"] = spec.default_factory
            params.append(f"{name}=_MISSING")
            value_text = f"_f_{name}() if {name} is _MISSING else {name}"
        else:
            if seen_default:
                raise TypeError(f"non-default argument {name!r} follows default argument")
            params.append(name)
            value_text = name
        body.append(f"    _set(self, {name!r}, {value_text})" if frozen
                    else f"    self.{name} = {value_text}")
        if spec.repr:
            shown.append(name)
        # a default stays a class attribute (as dataclasses leave it), a field() spec does not
        if type(value) is _Field or slots:
            if name in cls.__dict__:
                delattr(cls, name)
            if type(value) is _Field and spec.default is not _MISSING and not slots:
                setattr(cls, name, spec.default)
    if slots:
        ns = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
        ns["__slots__"] = tuple(names)
        qualname = cls.__qualname__
        cls = type(cls)(cls.__name__, cls.__bases__, ns)
        cls.__qualname__ = qualname
    source = (f"def __init__(self{''.join(', ' + p for p in params)}):\n"
              + ("\n".join(body) if body else "    pass") + "\n")
    cls._fields = tuple(names)
    cls._repr_fields = tuple(shown)
    # as dataclasses do, a method the class body writes itself is kept
    own = set(cls.__dict__)
    for name, method in (("__init__", _compiled_on_first_call(cls, source, space)),
                         ("__repr__", _repr), ("__eq__", _eq)):
        if name not in own:
            setattr(cls, name, method)
    if frozen:
        cls.__setattr__ = _frozen_setattr
        cls.__delattr__ = _frozen_delattr
        if slots:   # pickle and copy would restore the fields through __setattr__
            cls.__getstate__ = _fields_state
            cls.__setstate__ = _set_fields_state
    # a __hash__ of the body is kept, but not the None Python puts there beside an own __eq__
    explicit_hash = "__hash__" in own and not (cls.__dict__["__hash__"] is None
                                               and "__eq__" in own)
    if not explicit_hash:
        # frozen: hashed by fields; else compared by value and mutable: unhashable
        cls.__hash__ = _hash if frozen else None
    return cls


def _compiled_on_first_call(cls, source: str, space: dict):
    """A stand-in ``__init__`` that compiles the record's own from ``source`` on the first
    construction, puts it on ``cls`` and runs it: a record a run never constructs costs no
    compile (issue 16: 9 of the 26 records a small file's ``allocate`` imports, 0.5 ms)."""
    def __init__(self, *args, **kwargs):
        exec(source, space)
        init = space["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__ = init
        init(self, *args, **kwargs)
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _repr(self) -> str:
    inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._repr_fields)
    return f"{self.__class__.__qualname__}({inner})"


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    return (tuple(getattr(self, f) for f in self._fields)
            == tuple(getattr(other, f) for f in other._fields))


def _hash(self) -> int:
    return hash(tuple(getattr(self, f) for f in self._fields))


def _frozen_setattr(self, name, value):
    raise FrozenRecordError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name):
    raise FrozenRecordError(f"cannot delete field {name!r}")


def _fields_state(self) -> list:
    return [getattr(self, f) for f in self._fields]


def _set_fields_state(self, state: list) -> None:
    for f, value in zip(self._fields, state):
        object.__setattr__(self, f, value)


def replace(obj, /, **changes):
    """A copy of record ``obj`` with ``changes`` (field name: new value), as
    :func:`dataclasses.replace`."""
    unknown = set(changes) - set(obj._fields)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field(s) {', '.join(sorted(unknown))}")
    return obj.__class__(**{f: changes.get(f, getattr(obj, f)) for f in obj._fields})
