# SPDX-License-Identifier: MIT
"""Reading a file pydepth did not write itself: opened without blocking (a FIFO cannot hang
the open), regular files only (a FIFO, device, socket or directory is refused before a byte is
read), at most the cap of its kind (``CAPS``, checked against fstat before reading), and
decoded strictly; every refusal names the file and its kind."""
from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import Any, Iterator, Tuple, Type

from ..errors import InputFileError, PydepthError

__all__ = ["CAPS", "open_regular", "read_bytes", "read_text", "read_json", "regular_file"]

_MIB = 1 << 20

#: The largest file of each kind pydepth reads (bytes); docs/files.md states them.
CAPS = {
    "training text": 128 * _MIB,
    "configuration": 1 * _MIB,
    "sweep spec": 1 * _MIB,
    "reference trace": 64 * _MIB,
    "published tables": 16 * _MIB,
    "training log": 64 * _MIB,
    "sweep manifest": 16 * _MIB,
    "sweep part": 256 * _MIB,
    "report input": 16 * _MIB,
    "summary": 1 * _MIB,
    "checkpoint": 1 << 62,  # bounded instead by what its header's config needs (pydepth/checkpoint.py)
}


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _reason(err: OSError) -> str:
    """The system's reason in the messages' case ("no such file or directory")."""
    text = err.strerror or str(err)
    return text[:1].lower() + text[1:]


def _oserror(error: Type[PydepthError], err: OSError, name: str, message: str) -> PydepthError:
    """The caller's error type; an OSError one keeps errno, reason and file name, so the CLI's one
    file-error form (``PATH: reason``) applies."""
    if issubclass(error, OSError) and err.errno is not None and err.strerror:
        return error(err.errno, message[len(name) + 2:] if message.startswith(f"{name}: ") else message, name)
    return error(message)


def _check_inside(name: str, inside: Any, kind: str, error: Type[PydepthError]) -> None:
    root = os.path.realpath(os.fspath(inside))
    real = os.path.realpath(name)
    if os.path.commonpath([root, real]) != root:
        raise error(f"{name}: the {kind} resolves to {real}, outside {root}; only files inside it are read")


@contextlib.contextmanager
def open_regular(path: Any, kind: str, error: Type[PydepthError] = InputFileError,
                 inside: Any = None) -> Iterator[Tuple[int, int]]:
    """``(descriptor, size)`` of the regular file at path, opened with O_NONBLOCK; a special
    file, one larger than ``CAPS[kind]``, or (given ``inside``) one that resolves outside that
    directory through a link is refused with ``error`` before a byte is read."""
    name = os.fspath(path)
    if name == "":
        raise error(f"the {kind} path is empty")
    if inside is not None:
        _check_inside(name, inside, kind, error)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(name, flags)
    except OSError as err:
        raise _oserror(error, err, name, f"{name}: cannot open the {kind}: {_reason(err)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{name} is {_kind(st.st_mode)}; the {kind} must be a regular file")
        if st.st_size > CAPS[kind]:
            raise error(f"{name}: the {kind} has {st.st_size} bytes, more than the {CAPS[kind]}-byte limit "
                        f"for a {kind}")
        yield fd, st.st_size
    finally:
        os.close(fd)


def regular_file(path: Any, kind: str, error: Type[PydepthError] = InputFileError, inside: Any = None) -> None:
    """Checks, without reading, that path is a regular file within the cap of its kind."""
    with open_regular(path, kind, error, inside):
        pass


def _read_fd(fd: int, size: int, name: str, kind: str, error: Type[PydepthError]) -> bytes:
    chunks, left = [], size
    try:
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break  # the file shrank since fstat: its content is what is left
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise _oserror(error, err, name, f"{name}: cannot read the {kind}: {_reason(err)}") from None
    return b"".join(chunks)


def read_bytes(path: Any, kind: str, error: Type[PydepthError] = InputFileError, inside: Any = None) -> bytes:
    """The bytes of the regular file at path (at most its size when opened, at most the cap)."""
    with open_regular(path, kind, error, inside) as (fd, size):
        return _read_fd(fd, size, os.fspath(path), kind, error)


def read_text(path: Any, kind: str, error: Type[PydepthError] = InputFileError, inside: Any = None) -> str:
    """The file's text, strictly UTF-8: an undecodable byte is refused naming its offset."""
    data = read_bytes(path, kind, error, inside)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{os.fspath(path)}: the {kind} is not UTF-8 text (byte {err.start}: "
                    f"{data[err.start:err.start + 1]!r})") from None


def read_json(path: Any, kind: str, error: Type[PydepthError] = InputFileError, inside: Any = None) -> Any:
    """The file's JSON value; malformed or too deeply nested JSON is refused naming the file."""
    source = read_text(path, kind, error, inside)
    try:
        return json.loads(source)
    except ValueError as err:
        raise error(f"{os.fspath(path)}: the {kind} is not JSON ({err})") from None
    except RecursionError:
        raise error(f"{os.fspath(path)}: the {kind} nests JSON too deeply") from None
