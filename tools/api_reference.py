# SPDX-License-Identifier: MIT
"""The API reference's pages, generated from the installed package's own ``__all__`` lists.

This file is the one place that decides what the reference shows, so a new public name cannot be
missed: a page per public package (its ``__all__``; a package without one shows each public
module's ``__all__``; the top-level package also shows what its public modules add), and one
page for the tree of every exception class under ``PydepthError``. The pages are markdown with
mkdocstrings' ``::: path`` blocks; `tools/mkdocs_hooks.py` hands them to ``mkdocs build``, and
``python tools/api_reference.py DIR`` writes them to DIR for a look without mkdocs. Reading the
``__all__`` lists imports every public package, so the torch and jax extras must be installed.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import pathlib
import pkgutil
import re
import sys
import types
from typing import Dict, Iterator, List, Optional, Tuple

ROOT = "pydepth"
#: the page (under the site's api/ directory) of the exception tree
EXCEPTIONS_PAGE = "exceptions.md"
#: packages whose public modules' extra names are shown besides the package's ``__all__``
#: (the top level's modules are entry points themselves: ``pydepth.optim``, ``pydepth.elementary``)
MODULE_SECTIONS = (ROOT,)


def _public(dotted: str) -> bool:
    return not any(part.startswith("_") for part in dotted.split("."))


def _children(package: str) -> Iterator[pkgutil.ModuleInfo]:
    """The direct submodules and subpackages of ``package``, found on disk without importing any
    of them (a subpackage needing torch or jax is listed without those installed)."""
    root = importlib.util.find_spec(ROOT)
    assert root is not None and root.submodule_search_locations is not None
    paths = [pathlib.Path(p, *package.split(".")[1:]) for p in root.submodule_search_locations]
    yield from pkgutil.iter_modules([str(p) for p in paths if p.is_dir()], package + ".")


def public_packages() -> List[str]:
    """Every package of pydepth whose dotted path has no private part, parents first."""
    found, todo = [], [ROOT]
    while todo:
        package = todo.pop(0)
        found.append(package)
        todo.extend(sorted(m.name for m in _children(package) if m.ispkg and _public(m.name)))
    return found


def _public_modules(package: str) -> List[str]:
    return sorted(m.name for m in _children(package) if not m.ispkg and _public(m.name))


def page_file(package: str) -> str:
    """The file name of a package's page under api/."""
    return package + ".md"


@functools.cache
def sections(package: str) -> List[Tuple[str, List[str]]]:
    """The (module, names) sections of a package's page, in reading order; each object once."""
    mod = importlib.import_module(package)
    shown: List[Tuple[str, List[str]]] = []
    seen: set = set()
    if hasattr(mod, "__all__"):
        shown.append((package, list(mod.__all__)))
        seen.update(_identity(mod, n) for n in mod.__all__)
    if hasattr(mod, "__all__") and package not in MODULE_SECTIONS:
        return shown
    for name in _public_modules(package):
        sub = importlib.import_module(name)
        extra = [n for n in getattr(sub, "__all__", ()) if _identity(sub, n) not in seen]
        seen.update(_identity(sub, n) for n in extra)
        if extra:
            shown.append((name, extra))
    return shown


def _identity(mod: types.ModuleType, name: str) -> object:
    """What makes two exported names the same object: classes, functions and modules by identity;
    values by the module and name that define them (equal numbers are not one constant)."""
    obj = getattr(mod, name)
    if inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj):
        return id(obj)
    return _defining_module(mod.__name__, name), name


def exception_classes() -> List[type]:
    """Every class under ``PydepthError`` that the public packages define or import, tree order."""
    for package in public_packages():
        sections(package)  # imports every module the pages show, so their classes are subclasses now
    from pydepth.errors import PydepthError

    def walk(cls: type) -> Iterator[type]:
        yield cls
        for sub in sorted(cls.__subclasses__(), key=lambda c: c.__name__):
            if _parent(sub) is cls:  # a class with two pydepth bases sits under its first
                yield from walk(sub)

    return list(walk(PydepthError))


def other_exceptions() -> List[type]:
    """Exception classes the public packages export that are not under ``PydepthError``."""
    from pydepth.errors import PydepthError

    found: Dict[int, type] = {}
    for package in public_packages():
        for module, names in sections(package):
            for name in names:
                obj = getattr(importlib.import_module(module), name)
                if inspect.isclass(obj) and issubclass(obj, BaseException) and not issubclass(obj, PydepthError):
                    found.setdefault(id(obj), obj)
    return sorted(found.values(), key=lambda c: c.__name__)


def _parent(cls: type) -> Optional[type]:
    from pydepth.errors import PydepthError

    return next((b for b in cls.__bases__ if issubclass(b, PydepthError)), None)


def render_path(module: str, name: str) -> str:
    """The path mkdocstrings reads ``module.name`` under: the module's own unless its source does not
    bind the name (a class imported on first use by ``__getattr__``) or a submodule has the same
    name (mkdocstrings would show the module), then the defining module's."""
    tree, _ = _source_tree(module)
    bound = {a.asname or a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    bound |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    shadowed = importlib.util.find_spec(f"{module}.{name}") is not None if _is_package(module) else False
    if not shadowed and (name in bound or any(_assigned(n, name) for n in tree.body) or "*" in bound):
        return f"{module}.{name}"
    obj = getattr(importlib.import_module(module), name)
    return f"{obj.__module__}.{obj.__qualname__}"


def _is_package(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    return spec is not None and spec.submodule_search_locations is not None


def exception_path(cls: type) -> str:
    """Where an exception class is read and anchored: its defining module (``pydepth`` re-exports
    ``pydepth.errors`` by a computed ``__all__``, which mkdocstrings cannot follow)."""
    return f"{cls.__module__}.{cls.__qualname__}"


def docstring(module: str, name: str) -> str:
    """The documentation of an exported name: the object's own docstring, or for a value the
    ``#:`` comment above its assignment (or the string below it) in the module defining it."""
    obj = getattr(importlib.import_module(module), name)
    if inspect.isclass(obj):  # its own, not one inherited from a base
        return inspect.cleandoc(vars(obj).get("__doc__") or "")
    if inspect.isroutine(obj) or inspect.ismodule(obj):
        return inspect.cleandoc(obj.__doc__ or "")
    return _value_comment(_defining_module(module, name), name)


@functools.cache
def _source_tree(module: str) -> Tuple[ast.Module, List[str]]:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    text = pathlib.Path(spec.origin).read_text(encoding="utf-8")
    return ast.parse(text), text.splitlines()


def _assigned(node: ast.stmt, name: str) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return any(isinstance(t, ast.Name) and t.id == name for t in targets)


def _defining_module(module: str, name: str) -> str:
    """The module whose source assigns ``name``, following ``from X import name`` from ``module``."""
    tree, _ = _source_tree(module)
    if any(_assigned(node, name) for node in tree.body):
        return module
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name and a.asname is None for a in node.names):
            package = module if _is_package(module) else module.rpartition(".")[0]
            relative = "." * node.level + (node.module or "")
            return _defining_module(importlib.util.resolve_name(relative, package) if node.level else relative, name)
    return module


def comment_above(lines: List[str], lineno: int) -> str:
    """The ``#:`` comment lines directly above line ``lineno`` (1-based), joined; "" if none."""
    found: List[str] = []
    index = lineno - 2
    while index >= 0 and lines[index].lstrip().startswith("#:"):
        found.insert(0, lines[index].lstrip()[2:].strip())
        index -= 1
    return " ".join(found)


def _value_comment(module: str, name: str) -> str:
    tree, lines = _source_tree(module)
    for index, node in enumerate(tree.body):
        if _assigned(node, name):
            after = tree.body[index + 1] if index + 1 < len(tree.body) else None
            text = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else None
            if isinstance(text, str):
                return inspect.cleandoc(text)
            return comment_above(lines, node.lineno)
    return ""


_ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"(?<=\S)::$", re.M)


def markdown_of(docstring: str) -> str:
    """A docstring's reStructuredText pieces as markdown: a ``:class:`X``` role as code, the ``::``
    that introduces an indented literal block as one colon."""
    return _LITERAL.sub(":", _ROLE.sub(r"`\1`", docstring))


def _summary(text: str) -> str:
    first = markdown_of(text).strip().split("\n\n")[0].replace("\n", " ")
    return first.replace("|", "\\|")


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if inspect.ismodule(obj):
        return "module"
    return "function" if callable(obj) else "value"


def package_page(package: str) -> str:
    """The markdown of one package's reference page."""
    out = [
        f"# `{package}`",
        "",
        f"::: {package}",
        "    options:",
        "      members: false",
        "      show_root_heading: false",
        "",
    ]
    for module, names in sections(package):
        mod = importlib.import_module(module)
        if module != package:  # the module's heading carries the anchor #module the table links to
            out += [f"::: {module}", "    options:", "      members: false", "      heading_level: 2", ""]
        out += ["| name | kind | what it is |", "|---|---|---|"]
        for name in names:
            obj = getattr(mod, name)
            kind = _kind(obj)
            if kind == "exception":
                target = f"{EXCEPTIONS_PAGE}#{exception_path(obj)}"  # type: ignore[arg-type]
            elif kind == "module":
                target = f"#{obj.__name__}"  # type: ignore[attr-defined]
            else:
                target = f"#{render_path(module, name)}"
            out.append(f"| [`{name}`]({target}) | {kind} | {_summary(docstring(module, name))} |")
        out.append("")
        for name in names:
            if _kind(getattr(mod, name)) not in ("exception", "module"):
                out += [f"::: {render_path(module, name)}", "    options:", "      heading_level: 3", ""]
    return "\n".join(out)


def exceptions_page() -> str:
    """The markdown of the exception tree: every class under ``PydepthError``, nested by base."""
    classes = exception_classes()
    depth: Dict[type, int] = {}
    out = [
        "# Exceptions",
        "",
        "Every refusal of pydepth raises one of these classes; each names the bad value, and a refusal",
        "changes nothing. Most also derive from the natural built-in class (shown after the name), so",
        "`except ValueError` keeps working. A class with two pydepth bases sits under its first.",
        "Every class of `pydepth.errors` is also importable from `pydepth` itself.",
        "",
    ]
    for cls in classes:
        parent = _parent(cls)
        depth[cls] = 0 if parent is None else depth[parent] + 1
        path = exception_path(cls)
        others = [b.__name__ for b in cls.__bases__ if b is not parent]
        also = f" ({', '.join(others)})" if others else ""
        out.append(f"{'    ' * depth[cls]}- [`{cls.__name__}`](#{path}){also}")
    others = other_exceptions()
    if others:
        out += ["", "Outside the tree (missing optional dependencies; plain `ImportError`s):", ""]
        out += [f"- [`{c.__name__}`](#{exception_path(c)}) ({c.__bases__[0].__name__})" for c in others]
    out.append("")
    for cls in [*classes, *others]:
        out += [
            f"::: {exception_path(cls)}",
            "    options:",
            "      heading_level: 2",
            "      show_bases: true",
            "      members: false",
            "",
        ]
    return "\n".join(out)


def pages() -> Dict[str, str]:
    """Every reference page: file name under api/ -> markdown."""
    found = {"index.md": _index()}
    found.update({page_file(p): package_page(p) for p in public_packages()})
    found[EXCEPTIONS_PAGE] = exceptions_page()
    return found


def _index() -> str:
    out = [
        "# API reference",
        "",
        "Generated from the package's own `__all__` lists (`tools/api_reference.py`): one page per",
        "public package, and the exception tree.",
        "",
        "| page | what it is |",
        "|---|---|",
    ]
    for package in public_packages():
        doc = _summary(inspect.cleandoc(importlib.import_module(package).__doc__ or ""))
        out.append(f"| [`{package}`]({page_file(package)}) | {doc} |")
    out.append(f"| [Exceptions]({EXCEPTIONS_PAGE}) | every class under `PydepthError`, as a tree |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "api-pages")
    target.mkdir(parents=True, exist_ok=True)
    for file, text in pages().items():
        (target / file).write_text(text, encoding="utf-8")
    print(f"wrote {len(pages())} pages to {target}")
