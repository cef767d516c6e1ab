"""Issue 12's documentation items: every package of ptxalloc opens with a docstring, and every
public class, function and method of the IR (``ptxalloc.ir``) has one (a method overriding a
documented one inherits its docstring, as :func:`inspect.getdoc` reads it)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import pytest

import ptxalloc
import ptxalloc.ir

PACKAGES = sorted(m.name for m in pkgutil.iter_modules(ptxalloc.__path__) if m.ispkg)
IR_MODULES = sorted(f"ptxalloc.ir.{m.name}" for m in pkgutil.iter_modules(ptxalloc.ir.__path__))


def test_the_packages_are_found():
    assert {"alloc", "analysis", "ir", "ptx", "report", "spill", "target", "verify"} <= set(
        PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_package_docstring(name):
    pkg = importlib.import_module(f"ptxalloc.{name}")
    assert (pkg.__doc__ or "").strip(), f"ptxalloc.{name} has no package docstring"


def _public(module):
    """(qualified name, object) of the public classes and functions a module defines, and of
    the public methods and properties of those classes."""
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj):
            yield name, obj
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if inspect.isfunction(member) or isinstance(member, (property, classmethod,
                                                                     staticmethod)):
                    yield f"{name}.{attr}", getattr(obj, attr) if not isinstance(
                        member, property) else member


@pytest.mark.parametrize("modname", IR_MODULES)
def test_ir_public_names_have_docstrings(modname):
    module = importlib.import_module(modname)
    assert (module.__doc__ or "").strip(), f"{modname} has no module docstring"
    missing = []
    for qual, obj in _public(module):
        if isinstance(obj, property):
            doc = obj.__doc__
        elif "." in qual:
            cls = getattr(module, qual.split(".")[0])
            doc = inspect.getdoc(getattr(cls, qual.split(".")[1]))
        else:
            doc = inspect.getdoc(obj)
            if dataclasses.is_dataclass(obj) and (doc or "").startswith(obj.__name__ + "("):
                doc = None          # the signature dataclass writes where there is no docstring
        if not (doc or "").strip():
            missing.append(qual)
    assert not missing, f"{modname}: no docstring on {', '.join(missing)}"
