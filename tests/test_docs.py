# SPDX-License-Identifier: MIT
"""The docs the tests keep true: the numerics contract and the sections the code cites, no machine
path anywhere, the guides and their links, the architecture guide's owners and subpackages, and
the tables generated from the report's declared fields."""
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).parent.parent
CONTRACT = ROOT / "docs" / "numerics.md"
SOURCES = ("csrc", "pydepth", "tests", "README.md", "benchmarks", "examples")


def _sections():
    found = set()
    for line in CONTRACT.read_text().splitlines():
        m = re.match(r"#{2,3} (\d+)\.(\d+)?", line)
        if m:
            found.add(m.group(1) + (f".{m.group(2)}" if m.group(2) else ""))
    return found


def _citations():
    for root in SOURCES:
        path = ROOT / root
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for f in files:
            if f.suffix not in (".c", ".h", ".py", ".pyx", ".pxd", ".md"):
                continue
            for lineno, line in enumerate(f.read_text().splitlines(), 1):
                for m in re.finditer(r"numerics\.md((?:[ ,;-]*§\d+(?:\.\d+)?)+)", line):
                    for ref in re.findall(r"§(\d+(?:\.\d+)?)", m.group(1)):
                        yield f.relative_to(ROOT), lineno, ref


def test_contract_is_in_the_repository_with_numbered_sections():
    sections = _sections()
    assert {str(n) for n in range(1, 12)} <= sections
    assert {"2.1", "3.1", "5.1", "5.8", "6.4"} <= sections


def test_every_cited_section_exists():
    sections = _sections()
    citations = list(_citations())
    assert len(citations) > 10  # the code does cite the contract
    missing = [(str(f), n, ref) for f, n, ref in citations if ref not in sections]
    assert not missing, missing


def test_nothing_cites_the_contract_by_a_section_name_instead_of_its_number():
    pattern = re.compile(r"numerics\.md section")
    offenders = [f"{f.relative_to(ROOT)}:{i}" for f in _text_files() if f.name != "test_docs.py"
                 for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not offenders, offenders


# a path of one machine: a home, a scratch or a work directory; commands in the repository run from any checkout
MACHINE_PATH = re.compile(r"(?<![\w.~$-])/(?:work|tmp|root|home|Users)/")
_NOT_SOURCES = {".git", "build", "dist", "_skbuild", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                ".hypothesis", ".venv", "venv", "node_modules"}


def _text_files():
    """Every text file of the checkout (UTF-8 without NUL bytes), outside build and tool directories."""
    for path in sorted(ROOT.rglob("*")):
        parts = path.relative_to(ROOT).parts
        if not path.is_file() or any(p in _NOT_SOURCES or p.endswith(".egg-info") for p in parts):
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        yield path


def test_the_text_files_scanned_for_machine_paths_include_every_part_of_the_repository():
    scanned = {f.relative_to(ROOT).parts[0] for f in _text_files()}
    assert {"benchmarks", "csrc", "docs", "examples", "pydepth", "tests", ".ci", "README.md",
            "pyproject.toml"} <= scanned, sorted(scanned)


def test_no_text_file_names_a_path_of_one_machine():
    offenders = [f"{f.relative_to(ROOT)}:{i}: {line.strip()[:100]}" for f in _text_files()
                 for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if MACHINE_PATH.search(line)]
    assert not offenders, "\n".join(offenders)


GUIDES = ("docs/architecture.md", "CONTRIBUTING.md", "CHANGELOG.md")


def _markdown_files():
    return [ROOT / "README.md", *(ROOT / g for g in GUIDES[1:]), *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "benchmarks").glob("*.md")), ROOT / "tests" / "README.md",
            ROOT / ".ci" / "steps" / "README.md"]


def test_the_guides_for_the_next_engineer_exist_and_the_readme_links_each():
    readme = (ROOT / "README.md").read_text()
    for guide in GUIDES:
        assert (ROOT / guide).is_file(), guide
        assert f"]({guide})" in readme, f"README.md does not link {guide}"


def test_every_relative_link_in_the_docs_points_at_a_file_and_heading_that_exist():
    broken = []
    for md in _markdown_files():
        text = md.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:: outside the repository
                continue
            path, _, anchor = target.partition("#")
            dest = (md.parent / path).resolve() if path else md
            if not dest.exists():
                broken.append(f"{md.relative_to(ROOT)}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text()):
                broken.append(f"{md.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken


def _anchors(markdown):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", markdown, flags=re.M)}


def test_the_architecture_guide_names_owners_that_exist():
    text = (ROOT / "docs" / "architecture.md").read_text()
    paths = set(re.findall(r"`((?:csrc|pydepth|tests|\.ci)/[\w./-]+\.(?:c|h|py|pyx|sh))`", text))
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, missing


def _markdown_table(markdown, header):
    """The body rows (cells stripped) of the table whose header row is ``header``."""
    lines = markdown.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(tuple(c.strip() for c in line.strip().strip("|").split(" | ")))
    return rows


def test_the_sweep_store_page_lists_the_columns_the_report_fields_declare_in_stored_order():
    from pydepth.sweep.rows import COLUMNS, column_table
    documented = _markdown_table((ROOT / "docs" / "sweep-store.md").read_text(), "| column | kind | meaning |")
    assert documented == [(f"`{c}`", kind, meaning) for c, kind, meaning in column_table()]
    assert [c.strip("`") for c, _, _ in documented] == [n for n, _ in COLUMNS]


def test_the_training_health_page_lists_the_metrics_the_report_fields_declare():
    from pydepth.monitoring import metric_table
    documented = _markdown_table((ROOT / "docs" / "training-health.md").read_text(), "| metric | unit | meaning |")
    assert documented == [(f"`{m}`", unit, meaning) for m, unit, meaning in metric_table()]


def _ownership_rows():
    """(rule, owner cell) of every row of the architecture guide's table of owners."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    return [(rule, owner) for rule, owner, _ in _markdown_table(text, "| rule | owner | read by |")]


_PATH = re.compile(r"^[\w./-]+\.(?:c|h|py|pyx|pxd|pyi|sh|md|toml)$|^[\w./-]+/$")


def _defines(path, name):
    """Whether ``path`` defines ``name``: a module-level assignment, function or class of a Python
    file; elsewhere (C, TOML) the identifier as a whole word (a table, macro or function name)."""
    source = path.read_text()
    if path.suffix != ".py" or name.startswith(("PYDEPTH_", "[")):
        return re.search(rf"(?<![\w\[]){re.escape(name)}(?![\w\]])" if not name.startswith("[")
                         else re.escape(name), source) is not None
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        found.update(t.id for t in targets if isinstance(t, ast.Name))
    return name in found


def test_the_ownership_table_has_a_row_per_rule_naming_files_that_exist():
    rows = _ownership_rows()
    assert len(rows) > 25 and len({rule for rule, _ in rows}) == len(rows)
    for rule, owner in rows:
        paths = [t for t in re.findall(r"`([^`]+)`", owner) if _PATH.match(t)]
        assert paths, f"{rule}: its owner names no file"
        missing = [p for p in paths if not ((ROOT / p).exists() or (ROOT / "docs" / p).exists())]
        assert not missing, f"{rule}: {missing}"


def test_every_owner_in_the_ownership_table_defines_the_names_it_owns():
    undefined = []
    for rule, owner in _ownership_rows():
        tokens = re.findall(r"`([^`]+)`", owner)
        files = [ROOT / t for t in tokens if _PATH.match(t) and (ROOT / t).is_file()]
        for name in (t for t in tokens if re.fullmatch(r"[A-Za-z_]\w*|\[[\w.]+\]", t)):
            if not any(_defines(f, name) for f in files):
                undefined.append(f"{rule}: {name} in none of {[str(f.relative_to(ROOT)) for f in files]}")
    assert not undefined, "\n".join(undefined)


def test_the_architecture_guide_names_every_subpackage():
    text = (ROOT / "docs" / "architecture.md").read_text()
    packages = sorted(p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "pydepth").rglob("__init__.py")
                      if p.parent != ROOT / "pydepth")
    unnamed = [p for p in packages if p not in text and p.replace("pydepth/", "", 1) + "/" not in text]
    assert not unnamed, unnamed


def test_the_tests_index_names_every_test_file_and_helper_once():
    text = (ROOT / "tests" / "README.md").read_text()
    named = re.findall(r"^\| `([\w./]+)` \|", text, flags=re.M)
    files = sorted(p.name for p in (ROOT / "tests").glob("*.py"))
    assert sorted(n for n in named if n.endswith(".py")) == files
    assert len(named) == len(set(named))


#: how the chapter identifies itself (its first lines and its source paths)
CHAPTER = ("Initialize residual projection weights for decoder depth", "Chapter 06 · Content revision 4",
           "llm-from-scratch-practical")
TWO_COMMANDS = """```bash
pip install . && pydepth demo --format table          # install, run the chapter demo
pip install '.[test,plot,torch,hf,sweep,train,jax]' && pytest -q tests   # install, run the tests
```"""


def test_the_readme_opens_with_the_two_commands_then_five_lines_that_identify_the_chapter():
    readme = (ROOT / "README.md").read_text()
    assert readme.startswith("# pydepth\n\n" + TWO_COMMANDS + "\n\n")
    opening = readme[len("# pydepth\n\n" + TWO_COMMANDS + "\n\n"):].split("\n\n", 1)[0].splitlines()
    assert [line.split("**")[1] for line in opening] == ["What it is", "For whom", "What it shows", "One figure",
                                                         "The chapter"]
    figure = re.search(r"!\[[^\]]+\]\((docs/figures/[\w.-]+\.png)\)", opening[3])
    assert figure and (ROOT / figure.group(1)).is_file()
    assert all(part in opening[4] for part in CHAPTER)


def test_the_readme_says_what_it_computes_and_defines_its_terms_before_addressing_contributors():
    readme = (ROOT / "README.md").read_text()
    computes = readme.index("## What it computes")
    assert computes < readme.index("## Using it") < readme.index("## For contributors")
    section = readme[computes:readme.index("## Using it")]
    for term in ("occurrence-local", "same-base unscaled control", "completed mean-loss adjoints"):
        first = readme.index(term)  # its first use is in the section that defines it
        assert computes < first < computes + len(section), term
        assert re.search(re.escape(term) + r"[^.]*:", section.replace("\n", " ")), f"{term} is not defined"


def test_the_citation_file_identifies_the_chapter_as_the_readme_does():
    citation = (ROOT / "CITATION.cff").read_text()
    assert all(part in citation for part in CHAPTER)
    assert "The chapter's authors" not in citation
