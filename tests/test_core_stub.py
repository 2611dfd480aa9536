# SPDX-License-Identifier: MIT
"""pydepth/_native/_core.pyi describes exactly what the compiled pydepth._native._core exports."""
import ast
import pathlib
import types

import pydepth
from pydepth._native import _core

STUB = pathlib.Path(pydepth.__file__).parent / "_native" / "_core.pyi"


def _stub_names():
    tree = ast.parse(STUB.read_text())
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


def test_every_public_name_of_the_core_is_in_the_stub_and_every_stub_name_exists():
    names, _ = _stub_names()
    public = {k for k, v in vars(_core).items() if not k.startswith("_") and not isinstance(v, types.ModuleType)}
    assert sorted(public - names) == []
    assert sorted(n for n in names if not hasattr(_core, n)) == []


def test_every_public_method_of_a_stubbed_class_is_in_the_stub_and_exists():
    _, classes = _stub_names()
    for name, members in classes.items():
        cls = getattr(_core, name)
        base = Exception if issubclass(cls, BaseException) else object
        public = {a for a in dir(cls) if not a.startswith("_")} - set(dir(base))
        assert sorted(public - members) == [], name
        owner = cls(0) if base is Exception else cls  # an exception's fields exist on instances
        assert sorted(m for m in members if not m.startswith("__") and not hasattr(owner, m)) == [], name
