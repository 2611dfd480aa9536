# SPDX-License-Identifier: MIT
"""The safetensors container of a checkpoint: reading a regular file whose size bounds every
later check, validating its header before any tensor is touched, and encoding a header whose
bytes depend only on the tensors and metadata (sorted keys, fixed separators)."""
from __future__ import annotations

import json
import math
import os
import stat
import struct
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Mapping, Tuple

import numpy as np

from ..errors import CheckpointFileError, CheckpointFormatError

#: Largest header safetensors' own readers accept (bytes); a larger one is refused on both sides.
MAX_HEADER_BYTES = 100_000_000
_DTYPE = "F64"
_DTYPE_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
_ITEM = 8


@dataclass(frozen=True)
class Container:
    """A parsed file: the string metadata and, per tensor name, its float64 array (a read-only
    view of the file's bytes)."""

    metadata: Dict[str, str]
    tensors: Dict[str, np.ndarray]


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _read_all(fd: int, path: str) -> bytes:
    try:
        st = os.fstat(fd)
    except OSError as err:
        raise CheckpointFileError(err.errno, f"{path}: cannot stat the checkpoint: {err.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointFileError(f"{path} is {_kind(st.st_mode)}; a checkpoint is a regular file")
    chunks, left = [], st.st_size
    try:
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break  # the file shrank; the header checks report the truncation
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise CheckpointFileError(err.errno, f"{path}: cannot read the checkpoint: {err.strerror}") from None
    return b"".join(chunks)


def read_regular_file(path: str) -> bytes:
    """The bytes of the regular file at path, at most its size at opening; FIFOs, devices and
    directories are refused before a byte is read (O_NONBLOCK: opening a FIFO cannot wait)."""
    if path == "":
        raise CheckpointFileError("the checkpoint path is empty")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise CheckpointFileError(err.errno, f"{path}: cannot open the checkpoint: {err.strerror}") from None
    try:
        return _read_all(fd, path)
    finally:
        os.close(fd)


def _json(text: bytes, what: str, path: str) -> Any:
    try:
        return json.loads(text.decode("utf-8"))
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


def parse(data: bytes, path: str) -> Container:
    """Checks the header length, the header JSON, every entry's dtype, shape and offsets, and that
    the tensors tile the data exactly, all before one array is made."""
    if len(data) < 8:
        raise CheckpointFormatError(f"{path}: truncated: {len(data)} bytes, the header length alone needs 8")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise CheckpointFormatError(f"{path}: header length {n} exceeds the {len(data) - 8} bytes after it "
                                    "(truncated file or wrong header length)")
    if n > MAX_HEADER_BYTES:
        raise CheckpointFormatError(f"{path}: header of {n} bytes exceeds the {MAX_HEADER_BYTES}-byte limit")
    header = _json(data[8:8 + n], f"the {n}-byte header", path)
    if not isinstance(header, dict) or not isinstance(header.get("__metadata__"), dict):
        raise CheckpointFormatError(f"{path}: the header has no __metadata__ object; not a pydepth checkpoint")
    metadata = header.pop("__metadata__")
    if not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointFormatError(f"{path}: __metadata__ values must be strings")
    start, data_len = 8 + n, len(data) - 8 - n
    entries = {name: _entry(path, name, info, data_len) for name, info in header.items()}
    covered = 0
    for name, (_, begin, end) in sorted(entries.items(), key=lambda kv: (kv[1][1], kv[1][2])):
        if begin != covered:
            raise CheckpointFormatError(f"{path}: tensor {name!r} starts at data byte {begin}, expected {covered} "
                                        "(tensors overlap or leave a gap)")
        covered = end
    if covered != data_len:
        raise CheckpointFormatError(f"{path}: the tensors cover {covered} of the {data_len} data bytes")
    tensors = {name: np.frombuffer(data, dtype="<f8", count=(end - begin) // _ITEM, offset=start + begin).reshape(shape)
               for name, (shape, begin, end) in entries.items()}
    return Container(metadata, tensors)


def encode_header(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> bytes:
    """The length prefix and JSON header for tensors stored in sorted-name order, padded with
    spaces to a multiple of 8 bytes so the data is aligned; equal inputs give equal bytes."""
    header: Dict[str, Any] = {"__metadata__": dict(metadata)}
    offset = 0
    for name in sorted(tensors):
        size = _ITEM * tensors[name].size
        header[name] = {"dtype": _DTYPE, "shape": list(tensors[name].shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def tensor_bytes(tensors: Mapping[str, np.ndarray]) -> Iterator[memoryview]:
    """Each tensor's little-endian float64 bytes, in the header's (sorted-name) order."""
    for name in sorted(tensors):
        yield memoryview(np.ascontiguousarray(tensors[name], dtype="<f8")).cast("B")
