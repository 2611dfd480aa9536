# SPDX-License-Identifier: MIT
"""Checking a result directory's parts before they are trusted: each listed part's bytes
against its manifest hash and row count, every part's Parquet page checksums and spec, and no
cell stored twice. Damaged parts are refused by name, or moved aside when asked."""
from __future__ import annotations

import os
import pathlib
import time
from typing import Any, Dict, List, Optional, Tuple, Union

from .._files.reading import read_bytes
from .errors import DamagedPartError, SweepDependencyError, SweepResumeError, SweepStoreError
from .manifest import read_manifest, sha256, write_manifest

__all__ = ["DAMAGED_DIR", "pyarrow_modules", "part_files", "read_part", "verify_store"]

#: Where resume moves the damaged parts it recomputes (kept, never deleted).
DAMAGED_DIR = "_damaged"  # skipped by Parquet readers of the directory
_PART_PREFIX = "part-"
_FORMAT_KEY = b"pydepth.format"

PathLike = Union[str, "os.PathLike[str]"]


def pyarrow_modules() -> Any:
    """``(pyarrow, pyarrow.parquet)``, or :class:`SweepDependencyError` naming the extra."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise SweepDependencyError(
            "sweep results need pyarrow, part of the optional 'sweep' extra: "
            "pip install 'pydepth[sweep]'") from None
    return pa, pq


def part_files(out: PathLike) -> List[pathlib.Path]:
    """The finished parts in ``out`` (temporary files of batches in flight are ignored)."""
    d = pathlib.Path(out)
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.name.startswith(_PART_PREFIX) and p.suffix == ".parquet")


def read_part(path: pathlib.Path, data: bytes, spec_json: Optional[str], fmt: str, columns: Any = None) -> Any:
    """The part's table, its page checksums verified; SweepStoreError if it is not a readable
    result file, SweepResumeError if it belongs to another spec."""
    pa, pq = pyarrow_modules()
    try:
        # In the calling thread: Arrow's reader threads could outlive a CLI run and abort its exit.
        table = pq.read_table(pa.BufferReader(data), columns=columns, page_checksum_verification=True,
                              use_threads=False, pre_buffer=False)
    except Exception as err:  # pyarrow raises several types for damaged files
        raise SweepStoreError(f"{path}: not a readable Parquet file ({err})") from None
    meta = table.schema.metadata or {}
    if meta.get(_FORMAT_KEY) != fmt.encode():
        raise SweepStoreError(f"{path}: not a {fmt} result file")
    if spec_json is not None and meta.get(b"pydepth.sweep.spec", b"").decode() != spec_json:
        raise SweepResumeError(f"{path} holds results of a different sweep spec")
    return table


def _problem(path: pathlib.Path, entry: Optional[Dict[str, Any]], spec_json: str,
             fmt: str) -> Tuple[Optional[str], List[str], Dict[str, Any]]:
    try:
        data = read_bytes(path, "sweep part", SweepStoreError, inside=path.parent)
    except SweepStoreError as err:  # a directory, FIFO or oversized file under a part's name is damage
        reason = str(err).split("; ", 1)[0].replace(f"{path}: ", "", 1).replace(f"{path} ", "", 1)
        return reason, [], {"rows": 0, "cells": 0, "sha256": ""}
    got: Dict[str, Any] = {"rows": 0, "cells": 0, "sha256": sha256(data)}
    if entry is not None and got["sha256"] != entry["sha256"]:
        return (f"its content hash {got['sha256'][:16]}… differs from the manifest's {entry['sha256'][:16]}… "
                "(corrupted or edited)"), [], got
    try:
        cells = read_part(path, data, spec_json, fmt).column("cell_id").to_pylist()  # every page's checksum
    except SweepResumeError:
        raise
    except SweepStoreError as err:
        return str(err).split(": ", 1)[-1], [], got
    got.update(rows=len(cells), cells=len(set(cells)))
    if entry is not None and (got["rows"], got["cells"]) != (entry["rows"], entry["cells"]):
        return (f"it holds {got['rows']} rows of {got['cells']} cells; the manifest records {entry['rows']} "
                f"of {entry['cells']}", [], got)
    return None, cells, got


def _scan(out: PathLike, spec_json: str,
          fmt: str) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, str], Dict[str, List[str]]]:
    manifest = read_manifest(out)
    parts = {p.name: p for p in part_files(out)}
    entries: Dict[str, Any] = {}
    damaged: Dict[str, str] = {n: "it is listed in the manifest but missing" for n in manifest if n not in parts}
    cells_of: Dict[str, List[str]] = {}
    owner: Dict[str, str] = {}
    for name in sorted(parts, key=lambda n: (n not in manifest, n)):  # listed parts claim their cells first
        reason, cells, got = _problem(parts[name], manifest.get(name), spec_json, fmt)
        twin = next((owner[c] for c in cells if c in owner), None)
        if reason is None and twin is not None:
            reason = f"it repeats cells stored in {twin} (a duplicated part)"
        if reason is not None:
            damaged[name] = reason
            continue
        owner.update((c, name) for c in cells)
        cells_of[name], entries[name] = cells, got
    return manifest, entries, damaged, cells_of


def _set_aside(out: PathLike, name: str) -> None:
    src = pathlib.Path(out) / name
    if src.exists():
        aside = pathlib.Path(out) / DAMAGED_DIR
        aside.mkdir(exist_ok=True)
        os.replace(src, aside / f"{name}.{time.strftime('%Y%m%dT%H%M%S')}")


def verify_store(out: PathLike, spec_json: str, fmt: str, *, repair: bool = False,
                 record: bool = False) -> Dict[str, List[str]]:
    """Part name -> its cell ids, after every check; DamagedPartError names the first damaged
    part (and how many others) unless ``repair``, which moves them to ``_damaged/`` so their cells
    count as not done. ``record`` writes the manifest of the parts that passed."""
    manifest, entries, damaged, cells_of = _scan(out, spec_json, fmt)
    if damaged and not repair:
        name = sorted(damaged)[0]
        more = f" ({len(damaged) - 1} more damaged parts)" if len(damaged) > 1 else ""
        raise DamagedPartError(str(pathlib.Path(out) / name),
                               f"{pathlib.Path(out) / name}: {damaged[name]}{more}; resume with "
                               "--recompute-damaged (recompute_damaged=True) to set it aside and recompute its cells")
    for name in damaged:
        _set_aside(out, name)
    if record and (damaged or entries != manifest):
        write_manifest(out, entries)
    return cells_of
