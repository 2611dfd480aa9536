# SPDX-License-Identifier: MIT
"""The shape of every document a report reads (an observation, a training log's lines), checked
before a value is used: each field's type, the number of sites and rows, the length of a label.
A document that breaks it is a :class:`~pydepth.errors.ReportInputError` naming file and field."""
from __future__ import annotations

import math
import pathlib
from typing import Any, Callable, Dict, List, Tuple

from ..errors import ReportInputError

__all__ = ["MAX_LABEL", "MAX_ROWS", "MAX_SITES", "MAX_FIXTURES", "check_demo", "check_observe", "check_observations",
           "check_report", "check_steps"]

#: The most residual sites a report draws (a decoder of 4096 blocks has 8193).
MAX_SITES = 8193
#: The most log lines a report reads from one file.
MAX_ROWS = 1_000_000
#: The longest site label or status a report shows (characters).
MAX_LABEL = 200
#: The most fixtures a demo report draws (the chapter's demo has four).
MAX_FIXTURES = 64


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _text(v: Any) -> bool:
    return isinstance(v, str) and len(v) <= MAX_LABEL and not any("\ud800" <= c <= "\udfff" for c in v)


def _finite(v: Any) -> bool:
    return _number(v) and math.isfinite(v)


_LABEL = f"a string of at most {MAX_LABEL} characters of Unicode text"
#: field of a site -> (test, what it must be)
_SITE: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    "site": (_int, "an integer"),
    "label": (_text, _LABEL),
    "activation_ratio": (_finite, "a finite number"),
    "activation_status": (_text, _LABEL),
    "adjoint_ratio": (_finite, "a finite number"),
    "adjoint_status": (_text, _LABEL),
}
#: configuration fields a report names in titles
_CONFIG = ("model_width", "heads", "feed_forward_width", "vocabulary_size")


def _refuse(path: pathlib.Path, field: str, must: str, got: Any) -> ReportInputError:
    shown = repr(got)
    return ReportInputError(f"{path}: field {field} must be {must}, got {shown[:60]}{'…' if len(shown) > 60 else ''}")


def check_report(path: pathlib.Path, report: Any, field: str) -> None:
    """A health report's dict form: a non-empty list of at most MAX_SITES well-formed sites."""
    if not isinstance(report, dict):
        raise _refuse(path, field, "an object", report)
    sites = report.get("sites")
    if not isinstance(sites, list) or not 0 < len(sites) <= MAX_SITES:
        shown = f"{len(sites)} sites" if isinstance(sites, list) else sites
        raise _refuse(path, f"{field}.sites", f"a list of 1 to {MAX_SITES} sites", shown)
    for i, site in enumerate(sites):
        if not isinstance(site, dict):
            raise _refuse(path, f"{field}.sites[{i}]", "an object", site)
        for key, (test, must) in _SITE.items():
            if not test(site.get(key)):
                raise _refuse(path, f"{field}.sites[{i}].{key}", must, site.get(key))


def check_observe(path: pathlib.Path, doc: Any) -> None:
    """A ``pydepth observe --format json`` document."""
    if not isinstance(doc, dict):
        raise _refuse(path, "(document)", "an object", doc)
    check_report(path, doc.get("report"), "report")
    control = doc.get("same_base_unscaled_control")
    if control is not None:
        if not isinstance(control, dict):
            raise _refuse(path, "same_base_unscaled_control", "an object", control)
        check_report(path, control.get("report"), "same_base_unscaled_control.report")
    config = doc.get("config")
    if config is not None:
        if not isinstance(config, dict):
            raise _refuse(path, "config", "an object", config)
        for key in _CONFIG:
            if not _int(config.get(key)):
                raise _refuse(path, f"config.{key}", "an integer", config.get(key))


def _check_rows(path: pathlib.Path, rows: List[Dict[str, Any]]) -> None:
    if len(rows) > MAX_ROWS:
        raise ReportInputError(f"{path}: {len(rows)} lines, more than the {MAX_ROWS} a report reads")
    for i, row in enumerate(rows):
        for key, test, must in (("step", _int, "an integer"), ("loss", _finite, "a finite number")):
            if not test(row.get(key)):
                raise _refuse(path, f"line {i + 1}: {key}", must, row.get(key))


def check_steps(path: pathlib.Path, rows: List[Dict[str, Any]]) -> None:
    """The lines of ``train.jsonl``: an integer step and a numeric loss each."""
    _check_rows(path, rows)


def check_observations(path: pathlib.Path, rows: List[Dict[str, Any]]) -> None:
    """The lines of ``health.jsonl``: a step, a loss and a health report each."""
    _check_rows(path, rows)
    for i, row in enumerate(rows):
        check_report(path, row.get("report"), f"line {i + 1}: report")


#: field of a demo fixture -> (test, what it must be)
_FIXTURE: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    "id": (_text, _LABEL),
    "title": (_text, _LABEL),
    "layers": (_int, "an integer"),
    "width": (_int, "an integer"),
    "factor": (_finite, "a finite number"),
}


def check_demo(path: pathlib.Path, doc: Any) -> None:
    """A ``pydepth demo --format json`` document: the band, and 1 to MAX_FIXTURES fixtures each
    with its initialized report and its same-base unscaled control."""
    if not isinstance(doc, dict):
        raise _refuse(path, "(document)", "an object", doc)
    band = doc.get("band")
    if not (isinstance(band, list) and len(band) == 2 and all(_finite(v) for v in band)):
        raise _refuse(path, "band", "a list of two finite numbers", band)
    fixtures = doc.get("fixtures")
    if not isinstance(fixtures, list) or not 0 < len(fixtures) <= MAX_FIXTURES:
        shown = f"{len(fixtures)} fixtures" if isinstance(fixtures, list) else fixtures
        raise _refuse(path, "fixtures", f"a list of 1 to {MAX_FIXTURES} fixtures", shown)
    for i, fx in enumerate(fixtures):
        if not isinstance(fx, dict):
            raise _refuse(path, f"fixtures[{i}]", "an object", fx)
        for key, (test, must) in _FIXTURE.items():
            if not test(fx.get(key)):
                raise _refuse(path, f"fixtures[{i}].{key}", must, fx.get(key))
        for part in ("initialized", "same_base_unscaled_control"):
            check_report(path, fx.get(part), f"fixtures[{i}].{part}")
            if not _finite(fx[part].get("loss")):
                raise _refuse(path, f"fixtures[{i}].{part}.loss", "a finite number", fx[part].get("loss"))
        if len(fx["initialized"]["sites"]) != len(fx["same_base_unscaled_control"]["sites"]):
            raise _refuse(path, f"fixtures[{i}].same_base_unscaled_control.sites",
                          f"{len(fx['initialized']['sites'])} sites like the initialized report",
                          f"{len(fx['same_base_unscaled_control']['sites'])} sites")
