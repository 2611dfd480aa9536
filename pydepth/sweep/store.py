# SPDX-License-Identifier: MIT
"""The result directory: one Parquet file per finished batch, plus ``_sweep.json``.

Each part is written to a hidden temporary name and renamed into place, so a killed sweep
never leaves a truncated part under a final name, then recorded in ``_manifest.json`` with its
row count and SHA-256; parts carry Parquet page checksums. Resume, reads and reruns verify every
part first (:mod:`.verify`); a resumed sweep skips every cell that has rows in a sound part.
The spec (canonical JSON) and the pydepth version are in every part's file metadata and in
``_sweep.json``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Set, Tuple, Union

from .._files.atomic import write_bytes
from .._files.lock import holding
from .._files.reading import read_bytes, read_json
from .rows import COLUMNS
from .errors import SweepResumeError, SweepStoreError
from .manifest import read_manifest, sha256, write_manifest
from .spec import SweepSpec
from .verify import part_files, pyarrow_modules, read_part, verify_store
from .._version import __version__

__all__ = ["FORMAT", "SPEC_FILE", "StoreKind", "SWEEP_STORE", "pyarrow_modules", "schema", "write_part", "part_files",
           "done_cells", "read_table", "read_spec", "prepare_directory", "claimed"]

#: Format tag of the stored results.
FORMAT = "pydepth-sweep-v1"
#: The spec file in a result directory.
SPEC_FILE = "_sweep.json"  # a leading _ : Parquet readers of the directory skip it
_PART_PREFIX = "part-"

PathLike = Union[str, "os.PathLike[str]"]


class StoreKind(NamedTuple):
    """What one kind of store holds: its format tag, spec file, result columns ``(name, kind)``,
    how a stored spec dict becomes a spec (an object with ``to_dict``/``to_json``) and the
    columns its rows are sorted by. The store's machinery (parts, manifest, verification, resume)
    is the same for every kind."""

    format: str
    spec_file: str
    columns: Tuple[Tuple[str, str], ...]
    spec_from_dict: Callable[[Any], Any]
    sort_keys: Tuple[str, ...]


#: The store of ``pydepth sweep`` and ``depth-check``.
SWEEP_STORE = StoreKind(FORMAT, SPEC_FILE, COLUMNS, SweepSpec.from_dict,
                        ("depth", "width", "seed", "policy", "step", "site"))


def schema(spec: Any, kind: StoreKind = SWEEP_STORE) -> Any:
    """The Arrow schema of the result rows, with the spec and version in its metadata."""
    pa, _ = pyarrow_modules()
    kinds = {"str": pa.string(), "int": pa.int64(), "uint": pa.uint64(), "float": pa.float64(),
             "bool": pa.bool_()}
    meta = {"pydepth.format": kind.format, "pydepth.version": __version__, "pydepth.sweep.spec": spec.to_json()}
    return pa.schema([pa.field(n, kinds[k], nullable=False) for n, k in kind.columns], metadata=meta)


def _atomic_write_bytes(path: pathlib.Path, data: bytes) -> None:
    write_bytes(path, data, "sweep result file", SweepStoreError)


#: Temporaries of writers that died: this writer's, and those of the writer before it.
_TORN = re.compile(r"\.pydepth-\d+-[A-Za-z0-9_]+\.tmp\Z"
                   r"|\.(part-[0-9a-f]+\.parquet|manifest\.json|sweep\.json)\.\d+\.tmp\Z")


@contextlib.contextmanager
def claimed(out: PathLike) -> Iterator[pathlib.Path]:
    """Creates and locks the store ``out`` for one sweep (RunDirectoryError when another live
    sweep holds it) and removes the temporary files of killed writers, which no live writer can
    own while the lock is held."""
    d = pathlib.Path(out)
    if os.path.lexists(d) and not d.is_dir():
        raise SweepStoreError(f"--out {out} exists and is not a directory")
    d.mkdir(parents=True, exist_ok=True)
    with holding(d, "pydepth sweep"):
        for name in os.listdir(d):
            if _TORN.match(name):
                with contextlib.suppress(OSError):
                    os.unlink(d / name)
        yield d


def write_part(out: PathLike, spec: Any, columns: Dict[str, List[Any]],
               kind: StoreKind = SWEEP_STORE) -> pathlib.Path:
    """Writes one batch's rows as ``part-{hash of its cell ids}.parquet``, atomically."""
    pa, pq = pyarrow_modules()
    table = pa.Table.from_pydict({n: columns[n] for n, _ in kind.columns}, schema=schema(spec, kind))
    cells = sorted(set(columns["cell_id"]))
    key = hashlib.sha1("\n".join(cells).encode()).hexdigest()[:16]
    path = pathlib.Path(out) / f"{_PART_PREFIX}{key}.parquet"
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_page_checksum=True)
    data = sink.getvalue().to_pybytes()
    _atomic_write_bytes(path, data)
    parts = read_manifest(out)
    parts[path.name] = {"rows": table.num_rows, "cells": len(cells), "sha256": sha256(data)}
    write_manifest(out, parts)
    return path


def done_cells(out: PathLike, spec: Any, *, repair: bool = False, kind: StoreKind = SWEEP_STORE) -> Set[str]:
    """Cell ids that already have rows in a sound part of ``out`` (every part verified, the
    manifest brought up to date); a damaged part raises DamagedPartError unless ``repair``."""
    done: Set[str] = set()
    for cells in verify_store(out, spec.to_json(), kind.format, repair=repair, record=True).values():
        done.update(cells)
    return done


def read_spec(out: PathLike, kind: StoreKind = SWEEP_STORE) -> Any:
    """The spec of the sweep stored in ``out`` (from ``_sweep.json``, or the kind's spec file)."""
    path = pathlib.Path(out) / kind.spec_file
    if not path.is_file():
        raise SweepStoreError(f"{out} is not a {kind.format} result directory: {kind.spec_file} is missing")
    doc = read_json(path, "sweep spec", SweepStoreError, inside=path.parent)
    if not isinstance(doc, dict) or doc.get("format") != kind.format or "spec" not in doc:
        raise SweepStoreError(f"{path}: not a {kind.format} spec file")
    return kind.spec_from_dict(doc["spec"])


def prepare_directory(out: PathLike, spec: Any, *, resume: bool, repair: bool = False,
                      kind: StoreKind = SWEEP_STORE) -> Set[str]:
    """Creates ``out`` (or checks it holds this very sweep) and returns the cells already done.

    Refuses with :class:`SweepResumeError` when ``out`` holds another spec, or holds results
    while ``resume`` is off (nothing is deleted), and with DamagedPartError when a part is
    damaged, unless ``repair`` (its cells are then recomputed)."""
    d = pathlib.Path(out)
    if d.exists() and not d.is_dir():
        raise SweepStoreError(f"--out {out} exists and is not a directory")
    d.mkdir(parents=True, exist_ok=True)
    spec_path = d / kind.spec_file
    parts = part_files(d)
    if spec_path.exists():
        stored = read_spec(d, kind)
        if stored.to_json() != spec.to_json():
            diff = sorted(k for k, v in spec.to_dict().items() if stored.to_dict().get(k) != v)
            raise SweepResumeError(f"{out} holds a different sweep (fields {', '.join(diff)} differ); "
                                   "choose another --out")
    elif parts:
        raise SweepResumeError(f"{out} holds result parts but no {kind.spec_file}")
    if parts and not resume:
        raise SweepResumeError(f"{out} already holds {len(parts)} result files; resume, or choose "
                               "an empty directory")
    doc = {"format": kind.format, "pydepth_version": __version__, "spec": spec.to_dict()}
    if not spec_path.exists():
        _atomic_write_bytes(spec_path, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
    return done_cells(d, spec, repair=repair, kind=kind)


def read_table(out: PathLike, *, columns: Optional[Iterable[str]] = None, kind: StoreKind = SWEEP_STORE) -> Any:
    """Every stored row of ``out`` as one Arrow table, sorted by the kind's keys (a sweep's:
    depth, width, seed, policy, step, site) so that equal sweeps give equal tables whatever the
    batching or order."""
    pa, _ = pyarrow_modules()
    spec = read_spec(out, kind)
    want = list(columns) if columns is not None else None
    if want is not None:
        unknown = [c for c in want if c not in dict(kind.columns)]
        if unknown:
            raise SweepStoreError(f"unknown result columns {unknown}")
        for key in kind.sort_keys:
            if key not in want:
                want.append(key)
    tables = []
    for name in verify_store(out, spec.to_json(), kind.format):
        p = pathlib.Path(out) / name
        data = read_bytes(p, "sweep part", SweepStoreError, inside=p.parent)
        tables.append(read_part(p, data, spec.to_json(), kind.format, columns=want))
    if not tables:
        return schema(spec, kind).empty_table() if want is None else \
            pa.schema([schema(spec, kind).field(c) for c in want]).empty_table()
    table = pa.concat_tables(tables)
    keys = [(k, "ascending") for k in kind.sort_keys]
    return table.sort_by(keys).replace_schema_metadata(schema(spec, kind).metadata)
