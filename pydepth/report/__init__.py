# SPDX-License-Identifier: MIT
"""``pydepth report``: one self-contained HTML page from the output directory of ``depth-check``,
``depth-transfer``, ``sweep``, ``train``, ``observe`` or ``demo`` (figures inline as SVG, tables,
the run's specification and versions, this machine's ``verify`` status, and how to read it).
Needs the ``plot`` extra."""
from __future__ import annotations

import os
import pathlib
from typing import Optional, Union

from .._files.atomic import write_bytes
from ..errors import OutputFileError, ReportInputError
from .page import Section, page
from .reading import HOW_TO_READ
from .run_info import environment_section, verify_section
from .sections import SECTIONS
from .sources import TRANSFER_SPEC_FILE, kind_of, read_json
from ..sweep.store import SPEC_FILE

__all__ = ["build_report", "write_report"]

PathLike = Union[str, "os.PathLike[str]"]


def build_report(directory: PathLike) -> str:
    """The HTML page of ``directory`` as a string."""
    from ..plots.style import pyplot
    pyplot()  # the figures need matplotlib: refuse before reading anything
    where = pathlib.Path(directory)
    kind = kind_of(where)
    recorded = []
    spec_file = next((where / f for f in (SPEC_FILE, TRANSFER_SPEC_FILE) if (where / f).is_file()), None)
    if spec_file is not None:
        stored = read_json(spec_file)
        recorded.append(("pydepth", str(stored.get("pydepth_version", "?"))[:40] if isinstance(stored, dict) else "?"))
    found = SECTIONS[kind](where)  # the verdict first, then how to read the rest
    sections = [*found[:1], Section("How to read this", HOW_TO_READ[kind]), *found[1:],
                environment_section(recorded), verify_section()]
    return page(f"pydepth {kind}: {where.resolve().name}", f"Report of the {kind} output in {where.resolve()}",
                sections)


def write_report(directory: PathLike, out: Optional[PathLike] = None) -> pathlib.Path:
    """Writes the page of ``directory`` to ``out`` and returns the path. The default is
    ``DIR-report.html`` beside the directory, so a result store holds only its own files. The
    page replaces ``out`` atomically (a link there is replaced, not written through); a page
    that cannot be written or encoded leaves the old file as it was."""
    where = pathlib.Path(directory)
    target = pathlib.Path(out) if out is not None else where.resolve().with_name(f"{where.resolve().name}-report.html")
    text = build_report(directory)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone surrogate from a file: refused before the old page is touched
        raise ReportInputError(f"the report of {where} cannot be encoded as UTF-8: {err.reason} at "
                               f"{text[max(0, err.start - 40):err.start]!r}; {target} is unchanged") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(target, data, "report", OutputFileError)
    return target
