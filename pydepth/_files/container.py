# SPDX-License-Identifier: MIT
"""The safetensors container of a checkpoint: a regular file whose header is checked from its
first bytes (length, JSON, entry count, dtypes, shapes, tiling) before any tensor is touched,
the tensors then read through the safetensors library's memory map, and files written by that
library, whose bytes depend only on the tensors and the one metadata entry."""
from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np
import safetensors
import safetensors.numpy

from ..errors import CheckpointFileError, CheckpointFormatError
from .reading import open_regular

#: Largest header safetensors' own readers accept (bytes); a larger one is refused on both sides.
MAX_HEADER_BYTES = 100_000_000
#: JSON objects a header may hold before its ``__metadata__`` bounds the rest by its config.
PRE_METADATA_OBJECTS = 4096
_DTYPE = "F64"
_DTYPE_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
_ITEM = 8


@dataclass(frozen=True)
class Header:
    """A checked header: the string metadata, per tensor name its shape and data byte range, and
    the file's size; no tensor byte has been read."""

    metadata: Dict[str, str]
    entries: Dict[str, Tuple[Tuple[int, ...], int, int]]
    size: int


class _ObjectBound:
    """Counts the JSON objects of a header as they are parsed and stops the parse at ``cap``;
    the ``__metadata__`` object (written first) replaces the cap with what its config needs."""

    def __init__(self, path: str, cap_of: Callable[[Mapping[str, Any], int], int], data_len: int) -> None:
        self.path, self.cap_of, self.data_len = path, cap_of, data_len
        self.count, self.cap, self.bounded = 0, PRE_METADATA_OBJECTS, False

    def __call__(self, pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
        self.count += 1
        if self.count > self.cap:
            where = "its config needs" if self.bounded else "may precede __metadata__"
            raise CheckpointFormatError(f"{self.path}: the header lists more than {self.cap} objects, more than "
                                        f"{where}")
        obj = dict(pairs)
        if not self.bounded and isinstance(obj.get("pydepth"), str):
            self.cap, self.bounded = self.count + 1 + max(0, self.cap_of(obj, self.data_len)), True
        return obj


def _json(text: bytes, what: str, path: str, hook: Optional[_ObjectBound] = None) -> Any:
    try:
        return json.loads(text.decode("utf-8"), object_pairs_hook=hook)
    except CheckpointFormatError:
        raise  # the object bound's refusal, itself a ValueError
    except (UnicodeDecodeError, ValueError):
        raise CheckpointFormatError(f"{path}: {what} is not JSON (wrong header length?)") from None
    except RecursionError:
        raise CheckpointFormatError(f"{path}: {what} nests JSON too deeply to be a checkpoint") from None


def _natural(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _entry(path: str, name: str, info: Any, data_len: int) -> Tuple[Tuple[int, ...], int, int]:
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        raise CheckpointFormatError(f"{path}: header entry {name!r} must hold exactly dtype, shape and data_offsets")
    if info["dtype"] != _DTYPE:
        shown = _DTYPE_NAMES.get(info["dtype"], "unknown") if isinstance(info["dtype"], str) else "not a string"
        raise CheckpointFormatError(f"{path}: tensor {name!r} has dtype {shown} ({str(info['dtype'])[:20]!r}); "
                                    "a pydepth "
                                    f"checkpoint holds {_DTYPE} (float64) tensors only")
    shape, offsets = info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or len(shape) > 8 or not all(_natural(d) and d < 2**63 for d in shape):
        raise CheckpointFormatError(f"{path}: tensor {name!r} has shape {str(shape)[:80]}; expected a list of "
                                    "sizes below 2**63 (an array dimension's limit, even where another is 0)")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_natural(o) for o in offsets):
        raise CheckpointFormatError(f"{path}: tensor {name!r} has data_offsets {str(offsets)[:80]}")
    begin, end = offsets
    if not begin <= end <= data_len or end - begin != _ITEM * math.prod(shape):
        raise CheckpointFormatError(f"{path}: tensor {name!r} of shape {shape} has data_offsets {offsets}, "
                                    f"which do not fit its {_ITEM * math.prod(shape)} bytes in the "
                                    f"{data_len} data bytes")
    return tuple(shape), begin, end


def _check_tiling(path: str, entries: Mapping[str, Tuple[Tuple[int, ...], int, int]], data_len: int) -> None:
    covered = 0
    for name, (_, begin, end) in sorted(entries.items(), key=lambda kv: (kv[1][1], kv[1][2])):
        if begin != covered:
            raise CheckpointFormatError(f"{path}: tensor {name!r} starts at data byte {begin}, expected {covered} "
                                        "(tensors overlap or leave a gap)")
        covered = end
    if covered != data_len:
        raise CheckpointFormatError(f"{path}: the tensors cover {covered} of the {data_len} data bytes")


def _read_exactly(fd: int, count: int, path: str) -> bytes:
    chunks, left = [], count
    try:
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break  # the file shrank; the caller reports the truncation
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise CheckpointFileError(err.errno, f"{path}: cannot read the checkpoint: {err.strerror}") from None
    return b"".join(chunks)


def _header(fd: int, size: int, path: str, cap_of: Callable[[Mapping[str, Any], int], int]) -> Header:
    """The length prefix and header from the file's first bytes; nothing after the header is read."""
    if size < 8:
        raise CheckpointFormatError(f"{path}: truncated: {size} bytes, the header length alone needs 8")
    (n,) = struct.unpack("<Q", _read_exactly(fd, 8, path).ljust(8, b"\0"))
    if n > size - 8:
        raise CheckpointFormatError(f"{path}: header length {n} exceeds the {size - 8} bytes after it "
                                    "(truncated file or wrong header length)")
    if n > MAX_HEADER_BYTES:
        raise CheckpointFormatError(f"{path}: header of {n} bytes exceeds the {MAX_HEADER_BYTES}-byte limit")
    text = _read_exactly(fd, n, path)
    if len(text) != n:
        raise CheckpointFormatError(f"{path}: truncated while reading its {n}-byte header")
    header = _json(text, f"the {n}-byte header", path, _ObjectBound(path, cap_of, size - 8 - n))
    if not isinstance(header, dict) or not isinstance(header.get("__metadata__"), dict):
        raise CheckpointFormatError(f"{path}: the header has no __metadata__ object; not a pydepth checkpoint")
    metadata = header.pop("__metadata__")
    if not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointFormatError(f"{path}: __metadata__ values must be strings")
    data_len = size - 8 - n
    entries = {name: _entry(path, name, info, data_len) for name, info in header.items()}
    _check_tiling(path, entries, data_len)
    return Header(metadata, entries, size)


def _reopen_path(fd: int, path: str) -> str:
    """A path naming the open file itself where the system has one, so the file checked is the
    file the library maps even if path is replaced meanwhile."""
    own = f"/proc/self/fd/{fd}"
    return own if os.path.exists(own) else path


def read(path: str, cap_of: Callable[[Mapping[str, Any], int], int],
         select: Callable[[Header], Iterable[str]]) -> Tuple[Header, Dict[str, np.ndarray]]:
    """Checks the regular file at path from its first bytes (length prefix, header, entry count
    bounded by ``cap_of(metadata, data bytes)``, dtypes, shapes, tiling), then lets ``select`` (which may
    refuse) name the tensors to read; only those are read, through safetensors' memory map."""
    with open_regular(path, "checkpoint", CheckpointFileError) as (fd, size):
        header = _header(fd, size, path, cap_of)
        names = list(select(header))
        if not names:
            return header, {}
        try:
            with safetensors.safe_open(_reopen_path(fd, path), framework="np") as f:
                tensors = {name: f.get_tensor(name) for name in names}
        except (safetensors.SafetensorError, OSError, ValueError) as err:
            raise CheckpointFormatError(f"{path}: safetensors cannot read the checkpoint: {err}") from None
    for name in names:
        arr, (shape, _, _) = tensors[name], header.entries[name]
        if arr.dtype != np.float64 or arr.shape != shape:
            raise CheckpointFormatError(f"{path}: tensor {name!r} changed while it was read")
    return header, tensors


def encode(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> bytes:
    """The whole file, written by safetensors: tensors in sorted-name order, the header padded to
    a multiple of 8 bytes; one metadata entry keeps equal inputs equal bytes in every process
    (safetensors orders several entries differently from run to run)."""
    if len(metadata) > 1:
        raise ValueError("a checkpoint's header holds one metadata entry, so its bytes are reproducible")
    arrays = {name: np.ascontiguousarray(arr, dtype="<f8") for name, arr in tensors.items()}
    return bytes(safetensors.numpy.save(arrays, metadata=dict(metadata)))


def header_length(blob: bytes) -> int:
    """The header length a file's first 8 bytes state."""
    return int(struct.unpack("<Q", blob[:8])[0])
