# SPDX-License-Identifier: MIT
"""Griffe extensions for the API reference (mkdocs.yml): how pydepth's docstrings are read there.
A value documented by a ``#:`` comment above its assignment shows that comment as its docstring,
and the reStructuredText pieces the docstrings use (``:class:`X``` roles, a ``::`` before a
literal block) read as markdown."""

from __future__ import annotations

import importlib.util
import pathlib
from typing import Any

from griffe import Attribute, Docstring, Extension, Object

_spec = importlib.util.spec_from_file_location("api_reference", pathlib.Path(__file__).with_name("api_reference.py"))
assert _spec is not None and _spec.loader is not None
_api = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_api)


class ValueComments(Extension):
    """Gives an attribute without a docstring the ``#:`` comment lines directly above it."""

    def on_attribute_instance(self, *, attr: Attribute, **kwargs: Any) -> None:
        """Called by Griffe for every attribute it reads from source."""
        if attr.docstring is not None or attr.lineno is None or attr.filepath is None:
            return
        path = attr.filepath if isinstance(attr.filepath, pathlib.Path) else pathlib.Path(attr.filepath[0])
        text = _api.comment_above(path.read_text(encoding="utf-8").splitlines(), attr.lineno)
        if text:
            attr.docstring = Docstring(text, lineno=attr.lineno, parent=attr)


class RestToMarkdown(Extension):
    """Turns the reStructuredText roles and literal-block markers of a docstring into markdown."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        """Called by Griffe for every object it reads."""
        if obj.docstring is not None:
            obj.docstring.value = _api.markdown_of(obj.docstring.value)
