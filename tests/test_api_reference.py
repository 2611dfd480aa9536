# SPDX-License-Identifier: MIT
"""The API reference site (mkdocs.yml, tools/api_reference.py): every public package has a page,
every name of every package's ``__all__`` and every exception class under ``PydepthError`` is
rendered by one of its ``::: path`` blocks, every documented name has a docstring, links that
leave the site are rewritten, and ``help(pydepth)`` opens with a quick start pointing there.
Checked on the generated markdown, so mkdocs need not be installed."""

import importlib
import importlib.util
import inspect
import pathlib
import pkgutil
import pydoc
import re
import sys
import types

import pytest
from conftest import need_extra

import pydepth

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
#: packages whose import needs an extra, and which one
EXTRA_OF = {"pydepth.torch": "torch", "pydepth.jax": "jax"}


def _load(name):
    """A module of tools/ (which the wheel does not ship), loaded from the checkout."""
    if name not in sys.modules:
        sys.path.insert(0, str(TOOLS))  # mkdocs_hooks imports its sibling api_reference
        try:
            spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(TOOLS))
    return sys.modules[name]


def _packages_on_disk():
    """Every public package of the installed pydepth, found here without the generator's help."""
    base = pathlib.Path(pydepth.__file__).parent
    found = []
    for init in base.rglob("__init__.py"):
        parts = ("pydepth", *init.parent.relative_to(base).parts)
        if not any(p.startswith("_") for p in parts):
            found.append(".".join(parts))
    return sorted(found)


def _need_extras_of(package):
    for prefix, extra in EXTRA_OF.items():
        if package == prefix or package.startswith(prefix + "."):
            need_extra(extra)


def _resolve(path):
    """The object a ``::: path`` block renders: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(path)


def _rendered(markdown):
    """The objects the ``::: path`` blocks of a page render, by (name, object)."""
    return [(p.rsplit(".", 1)[-1], _resolve(p)) for p in re.findall(r"^::: (\S+)$", markdown, flags=re.M)]


def test_the_reference_has_one_page_per_public_package_and_one_for_the_exceptions():
    api = _load("api_reference")
    packages = _packages_on_disk()
    assert {"pydepth", "pydepth.torch", "pydepth.jax", "pydepth.sweep", "pydepth.training"} <= set(packages)
    assert sorted(api.public_packages()) == packages


@pytest.mark.parametrize("package", _packages_on_disk())
def test_every_name_a_package_exports_is_rendered_by_the_reference(package):
    _need_extras_of(package)
    api = _load("api_reference")
    mod = importlib.import_module(package)
    page = api.package_page(package)
    rendered = _rendered(page)
    names = getattr(mod, "__all__", None)
    if names is None:  # a package without __all__ shows its public modules' lists
        modules = [m.name for m in pkgutil.iter_modules(mod.__path__, package + ".") if m.name.split(".")[-1][0] != "_"]
        exported = [
            (importlib.import_module(m), n) for m in modules for n in getattr(importlib.import_module(m), "__all__", ())
        ]
        assert exported, package
    else:
        exported = [(mod, n) for n in names]
    missing = []
    for owner, name in exported:
        obj = getattr(owner, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            if f"(exceptions.md#{obj.__module__}.{obj.__qualname__})" not in page:
                missing.append(f"{name} (no link to the exception page)")
        elif isinstance(obj, types.ModuleType):
            if not any(o is obj for _, o in rendered):
                missing.append(name)
        elif not any(n == name and o is obj for n, o in rendered):
            missing.append(name)
    assert not missing, f"{package}: {missing}"


def test_the_top_level_page_also_renders_what_its_public_modules_add():
    page = _load("api_reference").package_page("pydepth")
    rendered = _rendered(page)
    for module in ("pydepth.elementary", "pydepth.health", "pydepth.checkpoint", "pydepth.optim"):
        mod = importlib.import_module(module)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            assert any(n == name and o is obj for n, o in rendered), f"{module}.{name}"


def _all_exception_classes():
    for package in _packages_on_disk():
        importlib.import_module(package)
    for info in pkgutil.walk_packages(pydepth.__path__, "pydepth."):
        if not info.name.endswith("libpydepth_core"):
            importlib.import_module(info.name)
    found, todo = set(), [pydepth.PydepthError]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.add(cls)
            todo.extend(cls.__subclasses__())
    return {c for c in found if c.__module__.startswith("pydepth")}


def test_every_exception_class_under_pydepth_error_is_in_the_tree_and_rendered():
    need_extra("torch", "jax")
    api = _load("api_reference")
    page = api.exceptions_page()
    rendered = {o for _, o in _rendered(page)}
    classes = _all_exception_classes()
    assert len(classes) > 60
    missing = sorted(c.__name__ for c in classes if c not in rendered or f"- [`{c.__name__}`](#" not in page)
    assert not missing, missing


def test_the_exception_tree_nests_each_class_under_its_pydepth_base():
    need_extra("torch", "jax")
    page = _load("api_reference").exceptions_page()
    indent = {m.group(2): len(m.group(1)) for m in re.finditer(r"^( *)- \[`(\w+)`\]", page, flags=re.M)}
    assert indent["PydepthError"] == 0
    assert indent["CheckpointError"] == indent["PydepthError"] + 4
    assert indent["CheckpointFileError"] == indent["CheckpointError"] + 4
    assert indent["SweepStoreError"] == indent["SweepError"] + 4


@pytest.mark.parametrize("package", _packages_on_disk())
def test_every_name_the_reference_shows_has_a_docstring(package):
    _need_extras_of(package)
    api = _load("api_reference")
    undocumented = [f"{m}.{n}" for m, names in api.sections(package) for n in names if not api.docstring(m, n).strip()]
    assert not undocumented, undocumented


def test_a_value_is_documented_by_the_comment_above_its_assignment():
    api = _load("api_reference")
    assert api.docstring("pydepth", "HEALTH_BAND").startswith("The inclusive band")  # defined in pydepth.health
    assert api.comment_above(["x = 1", "#: first", "#: second", "Y = 2"], 4) == "first second"
    assert api.comment_above(["# plain comment", "Y = 2"], 2) == ""


def test_restructuredtext_roles_and_literal_markers_read_as_markdown_on_the_site():
    api = _load("api_reference")
    text = "Raises :class:`pydepth.TokenError` (see :func:`~pydepth.no_grad`). Example::\n\n    x = 1\n"
    assert api.markdown_of(text) == "Raises `pydepth.TokenError` (see `pydepth.no_grad`). Example:\n\n    x = 1\n"


class _Files:
    """What the link rewriting asks of mkdocs' file collection: whether docs/ holds a page."""

    def __init__(self, names):
        self.names = set(names)

    def get_file_from_path(self, path):
        return path if path in self.names else None


class _Page:
    def __init__(self, src_uri):
        self.file = types.SimpleNamespace(src_uri=src_uri)


def _rewrite(markdown, src_uri, docs=("numerics.md", "figures/depth-policy-ratios.png")):
    hooks = _load("mkdocs_hooks")
    return hooks.on_page_markdown(markdown, page=_Page(src_uri), config=None, files=_Files(docs))


def test_links_of_the_readme_point_at_site_pages_or_become_plain_text():
    text = _rewrite(
        "See [the contract](docs/numerics.md#2-draws), [`CONTRIBUTING.md`](CONTRIBUTING.md), "
        "[`examples/x.py`](examples/x.py), [the script](examples/y.py), [web](https://example.org) and "
        "![fig](docs/figures/depth-policy-ratios.png).\n```\n[not a link](docs/numerics.md)\n```\n",
        "index.md",
    )
    assert "[the contract](numerics.md#2-draws)" in text
    assert "[`CONTRIBUTING.md`](contributing.md)" in text
    assert "`examples/x.py`," in text and "(examples/x.py)" not in text
    assert "the script (`examples/y.py` in the repository)" in text
    assert "[web](https://example.org)" in text
    assert "![fig](figures/depth-policy-ratios.png)" in text
    assert "[not a link](docs/numerics.md)" in text  # code is left alone


def test_links_of_a_guide_in_docs_resolve_from_docs():
    text = _rewrite("[readme](../README.md#citing), [tests](../tests/README.md), [c](numerics.md)", "platforms.md")
    assert text == "[readme](index.md#citing), [tests](tests.md), [c](numerics.md)"


def test_the_site_builds_strictly_with_the_generated_reference():
    config = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^strict: true$", config, flags=re.M)
    assert "tools/mkdocs_hooks.py" in config
    for kind in ("not_found", "anchors", "unrecognized_links"):
        assert re.search(rf"^  {kind}: warn$", config, flags=re.M), kind


def test_help_of_the_package_opens_with_a_quick_start_that_points_to_the_reference():
    text = pydoc.render_doc(pydepth, renderer=pydoc.plaintext)
    head = "\n".join(text.splitlines()[:60])
    assert "Quick start" in head and "pip install" in head and "pydepth demo" in head
    assert "pydepth.torch" in head and "mkdocs build" in head and "docs/" in head
    assert "PydepthError(" not in head  # the exception tree comes later, under CLASSES
    assert text.index("Quick start") < text.index("CLASSES")
