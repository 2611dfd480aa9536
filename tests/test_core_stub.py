# SPDX-License-Identifier: MIT
"""Each pydepth/_native/*.pyi describes exactly what its compiled skin module exports."""
import ast
import importlib
import pathlib
import types

import pytest

import pydepth

NATIVE = pathlib.Path(pydepth.__file__).parent / "_native"
SOURCE = pathlib.Path(__file__).resolve().parents[1] / "pydepth" / "_native"
MODULES = sorted(p.stem for p in SOURCE.glob("*.pyx"))  # every skin module has its stub


def _stub_names(module):
    tree = ast.parse((NATIVE / f"{module}.pyi").read_text())
    names, classes = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets)
        if isinstance(node, ast.ClassDef):
            classes[node.name] = {m.name if isinstance(m, ast.FunctionDef) else m.target.id
                                  for m in node.body if isinstance(m, (ast.FunctionDef, ast.AnnAssign))}
    return names, classes


def _defined_here(compiled, value):
    """Not a module, and not a class or function another skin module defines (CoreError)."""
    home = getattr(value, "__module__", compiled.__name__)
    return not isinstance(value, types.ModuleType) and home == compiled.__name__


def test_the_skin_is_split_into_stubbed_modules():
    assert "_core" not in MODULES and {"_status", "_graph", "_optim", "_testing"} <= set(MODULES)
    assert sorted(p.stem for p in NATIVE.glob("*.pyi")) == MODULES


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_of_a_skin_module_is_in_its_stub_and_every_stub_name_exists(module):
    compiled = importlib.import_module(f"pydepth._native.{module}")
    names, _ = _stub_names(module)
    public = {k for k, v in vars(compiled).items() if not k.startswith("_") and _defined_here(compiled, v)}
    assert sorted(public - names) == []
    assert sorted(n for n in names if not hasattr(compiled, n)) == []


@pytest.mark.parametrize("module", MODULES)
def test_every_public_method_of_a_stubbed_class_is_in_the_stub_and_exists(module):
    compiled = importlib.import_module(f"pydepth._native.{module}")
    _, classes = _stub_names(module)
    for name, members in classes.items():
        cls = getattr(compiled, name)
        base = Exception if issubclass(cls, BaseException) else object
        public = {a for a in dir(cls) if not a.startswith("_")} - set(dir(base))
        assert sorted(public - members) == [], name
        owner = cls(0) if base is Exception else cls  # an exception's fields exist on instances
        assert sorted(m for m in members if not m.startswith("__") and not hasattr(owner, m)) == [], name
