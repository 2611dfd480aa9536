# SPDX-License-Identifier: MIT
"""The package layout: a short top level, no import circle, and no alias for a module path that no
release shipped."""
import ast
import importlib
import pathlib
import re

import pytest

import pydepth

PACKAGE = pathlib.Path(pydepth.__file__).parent
SOURCE = pathlib.Path(__file__).resolve().parents[1] / "pydepth"


@pytest.mark.parametrize("old", ["pydepth.demo", "pydepth.laptop", "pydepth.trace", "pydepth.verify",
                                 "pydepth.init", "pydepth.plot_style", "pydepth.plots_train", "pydepth.train"])
def test_a_module_path_no_release_shipped_is_not_kept_alive(old):
    # the package was never released with these paths, so nothing aliases them to their new homes
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert not hasattr(pydepth, old.split(".")[1])


def test_an_unknown_attribute_of_the_package_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_module"):
        pydepth.no_such_module  # noqa: B018


def test_the_top_level_holds_at_most_fourteen_modules_besides_init_and_main():
    modules = [p.name for p in SOURCE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(modules) <= 14, sorted(modules)


def _imports(path: pathlib.Path) -> set:
    """The pydepth modules a source file imports (relative imports resolved)."""
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    package = parts[:-1]  # a module and a package's __init__ both resolve relative imports from their directory
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if module.startswith("pydepth"):
                found.add(module)
                found.update(f"{module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pydepth"))
    return found


def test_no_module_of_the_package_imports_itself_back_through_a_circle():
    names = {}
    for path in SOURCE.rglob("*.py"):
        parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    packages = {m for m, p in names.items() if p.name == "__init__.py"}
    # a package's __init__ re-exports its modules; every module imports its package first anyway
    graph = {m: {d for d in _imports(p) if d in names and d != m and d not in packages}
             for m, p in names.items() if m not in packages}

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    circles = sorted((a, b) for a in graph for b in graph[a] if a in reach(b))
    assert circles == [], circles


#: Branches McCabe counts one each (an elif is an If in the orelse; a ternary is an IfExp).
_BRANCHES = (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler)


def _complexity(function: ast.AST) -> int:
    """1 + branches (if/elif, ternary, for, while, except, match case) + each extra operand of a
    boolean operator + each comprehension filter; a nested def or class is measured on its own."""
    count, todo = 1, list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, _BRANCHES) or type(node).__name__ == "match_case":
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += len(node.ifs)
        todo.extend(ast.iter_child_nodes(node))
    return count


def test_the_complexity_measure_counts_branches_boolean_operands_and_filters():
    source = ("def f(a, b):\n    if a and b or a:\n        return [x for x in a if x if not x]\n"
              "    elif b:\n        return 1 if a else 2\n    for _ in a:\n        while b:\n            pass\n"
              "    try:\n        pass\n    except ValueError:\n        pass\n    def inner():\n        if a:\n"
              "            pass\n")
    assert _complexity(ast.parse(source).body[0]) == 1 + 1 + 2 + 2 + 1 + 1 + 1 + 1 + 1


_STRING = re.compile(r"""(?i)[rbfu]{0,2}('''|""\"|'|")""")


def _code_lines(text: str) -> list:
    """The source's lines with every string literal blanked and every comment removed (Cython
    is no Python to ast, but its strings, comments and keywords are Python's)."""
    out, i, line, quote = [], 0, [], None
    while i < len(text):
        c = text[i]
        if quote:  # a string's characters become spaces: a line it closes keeps its indentation
            if text.startswith(quote, i):
                line.append(quote + quote)
                i, quote = i + len(quote), None
            elif c == "\n":
                out.append("".join(line))
                line, i = [], i + 1
            else:
                line.append("  " if c == "\\" and text[i + 1:i + 2] != "\n" else " ")
                i += 2 if c == "\\" and text[i + 1:i + 2] != "\n" else 1
            continue
        m = _STRING.match(text, i) if not (line and (line[-1][-1:].isalnum() or line[-1][-1:] == "_")) else None
        if m:
            quote, i = m.group(1), m.end()
        elif c == "#":
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
        elif c == "\n":
            out.append("".join(line))
            line, i = [], i + 1
        else:
            line.append(c)
            i += 1
    out.append("".join(line))
    return out


#: A def, cpdef or cdef function's first line: a C return type may stand before the name.
_HEADER = re.compile(r"^(\s*)(?:async\s+)?(?:c?p?def)\s+(?!class\b|extern\b)(?:[\w\[\]:,. ]+?[\s*]+)?(\w+)\s*\(")
_DECISIONS = re.compile(r"\b(?:if|elif|and|or)\b|^\s*(?:for|while|except)\b")


def _cython_functions(text: str) -> list:
    """(name, first line, lines, complexity) of every function in Cython source, measured as
    the ast measure does: through its last non-blank line, nested functions on their own."""
    code = _code_lines(text)
    spans = []
    for start, row in enumerate(code):
        m = _HEADER.match(row)
        if not m or "=" in row[:m.end()]:
            continue
        indent, end = len(m.group(1)), start
        body = start + 1
        while body < len(code) and not code[body - 1].rstrip().endswith(":"):
            body += 1  # a signature over several lines ends at its colon
        for j in range(body, len(code)):
            if code[j].strip():
                if len(code[j]) - len(code[j].lstrip()) <= indent:
                    break
                end = j
        spans.append((m.group(2), start, body, end))
    out = []
    for name, start, body, end in spans:
        inner = {j for n, s, b, e in spans if start < s <= end for j in range(s, e + 1)}
        decisions = sum(len(_DECISIONS.findall(code[j])) for j in range(body, end + 1) if j not in inner)
        out.append((name, start + 1, end - start + 1, 1 + decisions))
    return out


def test_the_cython_measure_agrees_with_the_ast_measure():
    source = ("def f(a, b):\n    if a and b or a:\n        return [x for x in a if x if not x]\n"
              "    elif b:\n        return 1 if a else 2\n    for _ in a:\n        while b:\n            pass\n"
              "    try:\n        pass\n    except ValueError:\n        pass\n    def inner():\n        if a:\n"
              "            pass\n")
    node = ast.parse(source).body[0]
    assert _cython_functions(source)[0] == ("f", 1, node.end_lineno, _complexity(node))
    cython = ('cdef double *_value(self, int block,\n                     size_t dims[4]) except NULL:\n'
              '    """if and or, for while"""  # if\n    cdef size_t n = len(x) if a else 0\n'
              '    with nogil:\n        for i in range(n):\n            g(i, "elif")\n\n\n'
              'cdef class _G:\n    cdef int k\n\n    cpdef int f(self) noexcept nogil:\n        return 1\n')
    assert _cython_functions(cython) == [("_value", 1, 7, 3), ("f", 13, 2, 1)]


def _offenders(path: pathlib.Path) -> list:
    where = path.relative_to(SOURCE).as_posix()
    if path.suffix == ".pyx":
        found = _cython_functions(path.read_text())
    else:
        found = [(node.name, node.lineno, node.end_lineno - node.lineno + 1, _complexity(node))
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [f"{where}:{line} {name}: {lines} lines, complexity {complexity}"
            for name, line, lines, complexity in found if lines > 60 or complexity > 20]


def test_no_function_is_longer_than_60_lines_or_more_complex_than_20():
    paths = sorted([*SOURCE.rglob("*.py"), *SOURCE.rglob("*.pyx")])
    assert any(p.suffix == ".pyx" for p in paths)
    offenders = [o for path in paths for o in _offenders(path)]
    assert offenders == [], offenders


def test_the_installed_package_ships_its_typed_marker_and_the_skins_type_hints():
    assert (PACKAGE / "py.typed").is_file()
    compiled = sorted(p.stem for p in (SOURCE / "_native").glob("*.pyx"))
    assert compiled and all((PACKAGE / "_native" / f"{name}.pyi").is_file() for name in compiled), compiled


def test_every_function_of_the_package_is_annotated_as_mypy_is_configured_to_require():
    config = (SOURCE.parent / "pyproject.toml").read_text()
    assert "[tool.mypy]" in config and 'python_version = "3.9"' in config
    assert "disallow_untyped_defs = true" in config and "disallow_incomplete_defs = true" in config
    unannotated = []
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                args += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
                bare = [a.arg for a in args if a.annotation is None and a.arg not in ("self", "cls")]
                if node.returns is None or bare:
                    unannotated.append(f"{path.relative_to(SOURCE.parent)}:{node.lineno} {node.name} {bare}")
    assert not unannotated, unannotated
