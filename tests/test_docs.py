# SPDX-License-Identifier: MIT
"""The numerics contract lives in the repository and every section the code cites exists."""
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
