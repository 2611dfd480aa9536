# SPDX-License-Identifier: MIT
"""A directory owned by one run at a time: ``.pydepth.lock`` created exclusively, holding the
owner's pid and host. A lock whose pid is gone on this host is stale and taken over; any other
lock, this process's own included (a run started from inside another into the same directory),
refuses the second run."""
from __future__ import annotations

import contextlib
import json
import os
import socket
from typing import Any, Dict, Iterator, Optional, Union

from ..errors import RunDirectoryError
from .atomic import _alive

__all__ = ["LOCK_FILE", "holding", "owner"]

LOCK_FILE = ".pydepth.lock"
_MAX_LOCK_BYTES = 4096


def owner(directory: Union[str, os.PathLike[str]]) -> Optional[Dict[str, Any]]:
    """The lock's ``{"pid", "host", "what"}`` when directory is locked (unreadable: ``{}``), else None."""
    path = os.path.join(os.fspath(directory), LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        doc = json.loads(os.read(fd, _MAX_LOCK_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    return doc if isinstance(doc, dict) else {}


def _stale(doc: Dict[str, Any]) -> bool:
    pid = doc.get("pid")
    return (doc.get("host") == socket.gethostname() and isinstance(pid, int) and not isinstance(pid, bool)
            and pid > 0 and pid != os.getpid() and not _alive(pid))


def _create(path: str, what: str) -> bool:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "what": what}).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _acquire(directory: str, what: str) -> str:
    path = os.path.join(directory, LOCK_FILE)
    for _ in range(3):  # a stale lock removed by a racing run is retried, not trusted
        try:
            if _create(path, what):
                return path
        except OSError as err:
            raise RunDirectoryError(f"{directory}: cannot create the lock file {LOCK_FILE}: {err.strerror}") from None
        doc = owner(directory)
        if doc is None:
            continue
        if not _stale(doc):
            held = (f"process {doc.get('pid')} on {doc.get('host')} ({doc.get('what', 'a run')})" if doc
                    else "an unreadable lock")
            ours = " (this very process: a run cannot start inside another into the same directory)" \
                if doc.get("pid") == os.getpid() and doc.get("host") == socket.gethostname() else ""
            raise RunDirectoryError(f"{directory} is in use by {held}{ours}; if no such run is alive, "
                                    f"remove {path}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    raise RunDirectoryError(f"{directory}: another run keeps taking its lock {LOCK_FILE}")


@contextlib.contextmanager
def holding(directory: Union[str, os.PathLike[str]], what: str) -> Iterator[None]:
    """Holds the lock of directory (which must exist) for the block; RunDirectoryError, naming
    the owner, when another live run holds it."""
    where = os.fspath(directory)
    path = _acquire(where, what)
    try:
        yield
    finally:
        doc = owner(where)
        if doc and doc.get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                os.unlink(path)
