# SPDX-License-Identifier: MIT
"""Checks the bit-exactness claim on this machine: every traced value of the public fixtures
(shipped inside the package) recomputed and compared bit for bit."""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from importlib import resources
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..config import DecoderConfig
from .._files.reading import read_json
from ..errors import PydepthError, ReferenceDataError
from .trace import FORMAT, fixture_trace

__all__ = ["Difference", "FixtureResult", "public_fixtures_path", "load_fixtures", "verify_fixture",
           "verify"]

MODELS = ("initialized", "same_base_unscaled_control")
# Lists of {name, shape, bits} entries in a model trace, in the order they are compared.
ENTRY_LISTS = ("parameters", "forward", "site_adjoints", "parameter_gradients")
# Lists of bare bit patterns, one per residual site.
BIT_LISTS = ("site_activation_rms", "site_adjoint_rms")
# Fixture fields compared as plain values (the draws' generator states and the factor).
SCALARS = ("initial_rng_state", "final_rng_state", "factor", "parameter_count")


@dataclass(frozen=True)
class Difference:
    """The first value of a fixture whose recomputation differs from the reference."""

    where: str     # e.g. "initialized forward blocks.0.attention.weights[8]"
    got: str       # 16-hex-digit bit pattern (or the value, for non-float fields)
    expected: str

    def __str__(self) -> str:
        return f"{self.where}: got {_show(self.got)}, expected {_show(self.expected)}"


@dataclass(frozen=True)
class FixtureResult:
    """The outcome of one fixture: values compared and the first difference, if any."""

    fixture_id: str
    checked: int
    differing: int
    first_difference: Optional[Difference]

    @property
    def passed(self) -> bool:
        """True when every value matched bit for bit."""
        return self.differing == 0


def _show(text: str) -> str:
    """A bit pattern with its float value alongside; other values as they are."""
    if len(text) == 16 and all(c in "0123456789abcdef" for c in text):
        return f"{text} ({struct.unpack('>d', bytes.fromhex(text))[0]!r})"
    return text


def public_fixtures_path() -> Union[str, os.PathLike[str]]:
    """The public trace fixtures shipped inside the package (pydepth/reference/)."""
    path = resources.files("pydepth") / "reference" / "trace-public.json"
    if not path.is_file():
        raise ReferenceDataError(f"the packaged reference trace is missing: {path}")
    return path  # type: ignore[return-value]


def load_fixtures(path: Union[str, os.PathLike[str], None] = None) -> List[Dict[str, Any]]:
    """The fixtures of a pydepth-reference-trace-v1 file (default: the packaged public one)."""
    source = public_fixtures_path() if path is None else path
    try:
        doc = read_json(source, "reference trace", ReferenceDataError)
    except ReferenceDataError as err:
        raise ReferenceDataError(f"cannot read reference trace {err}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ReferenceDataError(f"{source} is not a {FORMAT} document")
    fixtures = doc.get("fixtures")
    if not isinstance(fixtures, list) or not fixtures or not all(isinstance(f, dict) for f in fixtures):
        raise ReferenceDataError(f"{source} has no fixtures")
    return fixtures


def _walk(expected: Dict[str, Any], got: Dict[str, Any]) -> Iterator[Tuple[str, Any, Any]]:
    """(location, got, expected) for every compared value of one fixture, in trace order."""
    for key in SCALARS:
        yield key, got.get(key), expected.get(key)
    for model in MODELS:
        want_m, got_m = expected.get(model), got[model]
        if not isinstance(want_m, dict):
            yield model, "present", "missing"
            continue
        for section in ENTRY_LISTS:
            want_list, got_list = want_m.get(section), got_m[section]
            if not isinstance(want_list, list) or len(want_list) != len(got_list):
                yield f"{model} {section}", f"{len(got_list)} entries", _count(want_list)
                continue
            for want, have in zip(want_list, got_list):
                name = have["name"]
                if not isinstance(want, dict) or want.get("name") != name or want.get("shape") != have["shape"]:
                    got_desc = f"{name} {have['shape']}"
                    want_desc = (f"{want.get('name')} {want.get('shape')}" if isinstance(want, dict)
                                 else repr(want))
                    yield f"{model} {section} entry", got_desc, want_desc
                    continue
                yield from _bits(f"{model} {section} {name}", have["bits"], want.get("bits"))
        for section in BIT_LISTS:
            yield from _bits(f"{model} {section}", got_m[section], want_m.get(section))


def _count(value: Any) -> str:
    return f"{len(value)} entries" if isinstance(value, list) else "no list"


def _bits(where: str, got: Sequence[str], want: Any) -> Iterator[Tuple[str, Any, Any]]:
    if not isinstance(want, list) or len(want) != len(got):
        yield where, f"{len(got)} values", (f"{len(want)} values" if isinstance(want, list) else "no values")
        return
    for i, (g, w) in enumerate(zip(got, want)):
        yield f"{where}[{i}]", g, w


def verify_fixture(fixture: Dict[str, Any]) -> FixtureResult:
    """Recomputes one fixture (draws, depth scaling, forward, loss, adjoints, gradients, site
    RMS) and compares every traced value bit for bit with the reference."""
    fixture_id = str(fixture.get("id", "?"))
    try:
        cfg = DecoderConfig.from_dict(fixture["config"])
        rows, cols = fixture["token_shape"]
        got = fixture_trace(cfg, fixture["seed"], fixture["tokens"], fixture["targets"],
                            fixture_id=fixture_id, batch=rows)
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, PydepthError):
            raise ReferenceDataError(f"fixture {fixture_id}: {err}") from None
        raise ReferenceDataError(f"fixture {fixture_id} is malformed: {err!r}") from None
    if got["token_shape"] != [rows, cols]:
        raise ReferenceDataError(f"fixture {fixture_id}: token_shape {fixture['token_shape']} does not "
                                 f"match {len(fixture['tokens'])} tokens")
    checked = differing = 0
    first: Optional[Difference] = None
    for where, have, want in _walk(fixture, got):
        checked += 1
        if have != want:
            differing += 1
            if first is None:
                first = Difference(where, str(have), str(want))
    return FixtureResult(fixture_id, checked, differing, first)


def verify(path: Union[str, os.PathLike[str], None] = None) -> List[FixtureResult]:
    """Every fixture of a reference trace file (default: the packaged public fixtures)."""
    return [verify_fixture(f) for f in load_fixtures(path)]

