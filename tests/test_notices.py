# SPDX-License-Identifier: MIT
"""The notices the data in csrc/libm/tables/ needs ship with the package and agree with the files."""
import pathlib
import re
from typing import Dict, List

try:
    import tomllib
except ImportError:  # Python < 3.11: pytest itself depends on tomli there
    import tomli as tomllib

ROOT = pathlib.Path(__file__).parent.parent
NOTICES = ROOT / "THIRD_PARTY_NOTICES.md"
TABLES = ROOT / "csrc" / "libm" / "tables"
NOTICE_FILES = ("LICENSE", "THIRD_PARTY_NOTICES.md")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _origin_table() -> Dict[str, str]:
    """file -> SPDX expression, from the one table in THIRD_PARTY_NOTICES.md that says so."""
    text = NOTICES.read_text()
    section = text.split("## Origin of each table file", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`csrc/"):
            rows[cells[0].strip("`")] = cells[3].strip("`")
    return rows


def _spdx_lines(path: pathlib.Path) -> List[str]:
    return re.findall(r"SPDX-License-Identifier:\s*(.+?)\s*(?:\*/)?$", path.read_text(), re.M)


def _and_terms(expression: str) -> List[str]:
    """The top-level AND operands of an SPDX expression, outer parentheses removed."""
    terms, depth, start = [], 0, 0
    for m in re.finditer(r"\(|\)| AND ", expression):
        depth += {"(": 1, ")": -1}.get(m.group(), 0)
        if m.group() == " AND " and depth == 0:
            terms.append(expression[start:m.start()])
            start = m.end()
    terms.append(expression[start:])
    return [t.strip()[1:-1] if t.strip().startswith("(") else t.strip() for t in terms]


def test_every_notice_file_is_a_license_file_and_in_the_sdist():
    project = _pyproject()
    license_files = project["project"]["license-files"]
    sdist = project["tool"]["scikit-build"]["sdist"]["include"]
    for name in NOTICE_FILES:
        assert (ROOT / name).is_file(), name
        assert name in license_files, f"{name} is not in pyproject's license-files"
        assert "/" + name in sdist, f"{name} is not in pyproject's sdist.include"
    assert all((ROOT / name).is_file() for name in license_files), license_files


def test_every_table_file_has_one_origin_row_and_its_spdx_line_matches_it():
    rows = _origin_table()
    files = sorted(str(p.relative_to(ROOT)) for p in TABLES.iterdir() if p.suffix in (".c", ".h"))
    assert sorted(rows) == files, "the origin table and csrc/libm/tables/ list different files"
    mismatched = {f: (_spdx_lines(ROOT / f), spdx) for f, spdx in rows.items() if _spdx_lines(ROOT / f) != [spdx]}
    assert not mismatched, mismatched


def test_the_license_expression_names_exactly_the_licences_the_tables_carry():
    expression = _pyproject()["project"]["license"]
    assert set(_and_terms(expression)) == set(_origin_table().values()) | {"MIT"}, expression


def test_each_licence_in_the_origin_table_has_its_text_in_the_notices():
    required = {  # where each identifier's licence text lives, and a phrase of that text
        "MIT": ("LICENSE", "Permission is hereby granted, free of charge"),
        "MIT OR Apache-2.0 WITH LLVM-exception": (NOTICES.name, "Copyright (c) 1999-2022, Arm Limited."),
        "SunPro": (NOTICES.name, "Developed at SunPro, a Sun Microsystems, Inc. business."),
        "LGPL-2.1-or-later": (NOTICES.name, "TERMS AND CONDITIONS FOR COPYING, DISTRIBUTION AND MODIFICATION"),
    }
    for spdx in set(_origin_table().values()):
        assert spdx in required, f"no notice text is known for {spdx}"
        name, phrase = required[spdx]
        assert phrase in (ROOT / name).read_text(), (spdx, name, phrase)
