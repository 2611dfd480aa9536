# SPDX-License-Identifier: MIT
"""Module paths users already import that now live in subpackages: ``import pydepth.demo`` (and
``pydepth.demo`` as an attribute) give the module at its new home, the same object."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Dict, Optional, Sequence

#: old name under ``pydepth`` -> its home now (the one table of moved modules)
MOVED: Dict[str, str] = {
    "init": "xavier",
    "demo": "chapter.demo",
    "laptop": "chapter.laptop",
    "trace": "chapter.trace",
    "verify": "chapter.verify",
    "plot_style": "plots.style",
    "plots_train": "plots.train",
    "train": "training",
}


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new home (its own ``__spec__`` is kept)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._spec: Optional[importlib.machinery.ModuleSpec] = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # importlib set the alias's spec; the module keeps its own


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds ``pydepth.<old>`` for every entry of :data:`MOVED`."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        package, _, leaf = fullname.rpartition(".")
        if package != "pydepth" or leaf not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(f"pydepth.{MOVED[leaf]}"))


def install() -> None:
    """Puts the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())


def moved_attribute(name: str) -> ModuleType:
    """``pydepth.<old>`` read as an attribute: the module at its new home."""
    if name not in MOVED:
        raise AttributeError(f"module 'pydepth' has no attribute {name!r}")
    return importlib.import_module(f"pydepth.{MOVED[name]}")
