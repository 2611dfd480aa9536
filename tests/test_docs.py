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


def test_nothing_cites_documents_outside_the_repository():
    pattern = re.compile(r"/work/shared|numerics\.md section")
    offenders = []
    for root in ("csrc", "pydepth", "tests", "README.md"):
        path = ROOT / root
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for f in files:
            if f.suffix in (".c", ".h", ".py", ".pyx", ".pxd", ".md") and f.name != "test_docs.py":
                offenders += [f"{f.relative_to(ROOT)}:{i}" for i, line in enumerate(f.read_text().splitlines(), 1)
                              if pattern.search(line)]
    assert not offenders, offenders
