# SPDX-License-Identifier: MIT
"""The chapter's published tables (six decimals) checked against pydepth's recomputation: the
four demo fixtures' site RMS values and ratios, their normalizers and their same-base controls."""
from __future__ import annotations

import os
from importlib import resources
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from .._files.reading import read_json
from ..errors import ReferenceDataError
from .demo import demo_trace
from .verify import Difference, FixtureResult

__all__ = ["published_tables_path", "load_published", "verify_published"]

#: the demo's keys of one site compared with the published ones
SITE_KEYS = ("activation_rms", "activation_ratio", "adjoint_rms", "adjoint_ratio")
#: the normalizers and extremes of the same-base control the chapter publishes
CONTROL_KEYS = ("input_activation_normalizer", "terminal_adjoint_normalizer", "activation_ratio_min",
                "activation_ratio_max", "adjoint_ratio_min", "adjoint_ratio_max")


def published_tables_path() -> Union[str, os.PathLike[str]]:
    """The chapter's published tables shipped inside the package (pydepth/reference/)."""
    path = resources.files("pydepth") / "reference" / "published-tables.json"
    if not path.is_file():
        raise ReferenceDataError(f"the packaged published tables are missing: {path}")
    return path  # type: ignore[return-value]


def load_published(path: Union[str, os.PathLike[str], None] = None) -> Dict[str, Any]:
    """The published tables (default: the packaged copy)."""
    source = published_tables_path() if path is None else path
    try:
        doc = read_json(source, "published tables", ReferenceDataError)
    except ReferenceDataError as err:
        raise ReferenceDataError(f"cannot read published tables {err}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("fixtures"), list):
        raise ReferenceDataError(f"{source} holds no published fixtures")
    return doc


def _pairs(got: Dict[str, Any], want: Dict[str, Any]) -> Iterator[Tuple[str, Any, Any]]:
    """(location, recomputed rounded to six decimals, published) for one fixture."""
    ini = got["initialized"]
    yield "factor", round(got["factor"], 6), want.get("factor")
    for key in ("input_activation_normalizer", "terminal_adjoint_normalizer"):
        yield key, round(ini[key], 6), want.get(key)
    sites: List[Any] = want["sites"] if isinstance(want.get("sites"), list) else []
    yield "sites", len(ini["sites"]), len(sites)
    for site, w in zip(ini["sites"], sites):
        for key in SITE_KEYS:
            yield f"site {site['site']} {key}", round(site[key], 6), w.get(key) if isinstance(w, dict) else None
    control, wcontrol = got["same_base_unscaled_control"], want.get("same_base_unscaled_control") or {}
    for key in CONTROL_KEYS:
        yield f"control {key}", round(control[key], 6), wcontrol.get(key)


def verify_published(path: Union[str, os.PathLike[str], None] = None) -> List[FixtureResult]:
    """Recomputes the demo's four fixtures and compares every published number at six decimals."""
    published = load_published(path)
    ours = {f["id"]: f for f in demo_trace()["fixtures"]}
    results = []
    for want in published["fixtures"]:
        fixture_id = str(want.get("id", "?")) if isinstance(want, dict) else "?"
        if fixture_id not in ours:
            raise ReferenceDataError(f"published fixture {fixture_id!r} is not one of the demo's {sorted(ours)}")
        checked = differing = 0
        first: Optional[Difference] = None
        for where, have, expected in _pairs(ours[fixture_id], want):
            checked += 1
            if have != expected:
                differing += 1
                first = first or Difference(where, repr(have), repr(expected))
        results.append(FixtureResult(f"{fixture_id} (published tables)", checked, differing, first))
    return results
