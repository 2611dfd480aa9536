# SPDX-License-Identifier: MIT
"""The manifest of a result directory: every finished part's row count, cell count and SHA-256,
recorded right after the part is renamed into place. Parts are checked against it before a
resume, a read or a rerun trusts them."""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
from typing import Any, Dict, Union

from .._files.atomic import write_bytes
from .._files.reading import read_text
from .errors import SweepStoreError

__all__ = ["MANIFEST_FILE", "MANIFEST_FORMAT", "read_manifest", "write_manifest", "sha256"]

MANIFEST_FILE = "_manifest.json"  # skipped by Parquet readers of the directory
MANIFEST_FORMAT = "pydepth-sweep-manifest-v1"
_ENTRY = {"rows": int, "cells": int, "sha256": str}

PathLike = Union[str, "os.PathLike[str]"]


def sha256(data: bytes) -> str:
    """The hex SHA-256 of a part's bytes."""
    return hashlib.sha256(data).hexdigest()


def _entry_ok(entry: Any) -> bool:
    return isinstance(entry, dict) and set(entry) == set(_ENTRY) and all(
        type(entry[k]) is t for k, t in _ENTRY.items())


def read_manifest(out: PathLike) -> Dict[str, Dict[str, Any]]:
    """Part name -> {"rows", "cells", "sha256"}; {} when the directory has no manifest yet."""
    path = pathlib.Path(out) / MANIFEST_FILE
    if not os.path.lexists(path):
        return {}
    text = read_text(path, "sweep manifest", SweepStoreError, inside=path.parent)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise SweepStoreError(f"{path}: not a {MANIFEST_FORMAT} file (not JSON); delete it to rebuild it "
                              "from the parts") from None
    parts = doc.get("parts") if isinstance(doc, dict) and doc.get("format") == MANIFEST_FORMAT else None
    if not isinstance(parts, dict) or not all(_entry_ok(e) for e in parts.values()):
        raise SweepStoreError(f"{path}: not a {MANIFEST_FORMAT} file")
    return parts


def write_manifest(out: PathLike, parts: Dict[str, Dict[str, Any]]) -> None:
    """Replaces the manifest atomically (sorted keys: equal stores give equal files)."""
    path = pathlib.Path(out) / MANIFEST_FILE
    text = json.dumps({"format": MANIFEST_FORMAT, "parts": parts}, indent=1, sort_keys=True) + "\n"
    write_bytes(path, text.encode(), "sweep manifest", SweepStoreError)
