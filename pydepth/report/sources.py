# SPDX-License-Identifier: MIT
"""Reading an output directory: which command wrote it, and its files as plain Python values.
Every unreadable or foreign file is a :class:`~pydepth.errors.ReportInputError` naming it."""
from __future__ import annotations

import json
import pathlib
from typing import Any, Dict, List, Optional

from .._files.reading import read_text
from ..chapter.demo import DEMO_FORMAT
from ..errors import ReportInputError
from ..sweep.presets import SUMMARY_FILE
from ..sweep.store import SPEC_FILE

TRANSFER_SPEC_FILE = "_transfer.json"  # the spec file of a depth-transfer store (sweep.transfer.TRANSFER_STORE)

__all__ = ["find_demo_document", "find_observe_document", "kind_of", "read_json", "read_json_lines",
           "read_own"]


def read_own(path: pathlib.Path, kind: str = "report input") -> str:
    """The UTF-8 text of a regular file of the report's directory (``path.parent``); a link out
    of it, a special file or one over the cap of its kind is refused naming it."""
    return read_text(path, kind, ReportInputError, inside=path.parent)


def read_json(path: pathlib.Path) -> Any:
    """A JSON file's value."""
    text = read_own(path)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ReportInputError(f"cannot read {str(path)!r} as JSON: {err}") from None


def read_json_lines(path: pathlib.Path) -> List[Dict[str, Any]]:
    """The objects of a JSON-lines log; a torn last line (a run stopped mid-write) is left out."""
    lines = read_own(path).splitlines()
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as err:
            if number == len(lines):
                break
            raise ReportInputError(f"{str(path)!r} line {number} is not JSON: {err}") from None
        if not isinstance(row, dict):
            raise ReportInputError(f"{str(path)!r} line {number} is not a JSON object")
        rows.append(row)
    return rows


def find_observe_document(directory: pathlib.Path) -> Optional[pathlib.Path]:
    """The first ``*.json`` file (by name) holding a ``pydepth observe`` result, or None."""
    for path in sorted(directory.glob("*.json")):
        try:
            doc = json.loads(read_own(path))
        except (ReportInputError, ValueError, RecursionError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("report"), dict) and "sites" in doc["report"]:
            return path
    return None


def find_demo_document(directory: pathlib.Path) -> Optional[pathlib.Path]:
    """The first ``*.json`` file (by name) holding a ``pydepth demo`` result, or None."""
    for path in sorted(directory.glob("*.json")):
        try:
            doc = json.loads(read_own(path))
        except (ReportInputError, ValueError, RecursionError):
            continue
        if isinstance(doc, dict) and doc.get("format") == DEMO_FORMAT:
            return path
    return None


# (kind, what marks it) in the order they are tried: a depth check is a sweep with a summary.
_MARKS = (
    ("depth-transfer", lambda d: (d / TRANSFER_SPEC_FILE).is_file()),
    ("depth-check", lambda d: (d / SPEC_FILE).is_file() and (d / SUMMARY_FILE).is_file()),
    ("sweep", lambda d: (d / SPEC_FILE).is_file()),
    ("train", lambda d: (d / "train.jsonl").is_file()),
    ("observe", lambda d: find_observe_document(d) is not None),
    ("demo", lambda d: find_demo_document(d) is not None),
)


def kind_of(directory: pathlib.Path) -> str:
    """Which command's output ``directory`` holds: depth-transfer, depth-check, sweep, train, observe or demo."""
    if not directory.is_dir():
        raise ReportInputError(f"{str(directory)!r} is not a directory")
    for kind, marked in _MARKS:
        if marked(directory):
            return kind
    raise ReportInputError(
        f"{str(directory)!r} holds no pydepth output: expected _sweep.json (sweep, depth-check), "
        "_transfer.json (depth-transfer), train.jsonl (train) or a JSON file written by "
        "'pydepth observe --format json --output' or 'pydepth demo --format json --output'")
