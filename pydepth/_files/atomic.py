# SPDX-License-Identifier: MIT
"""Replacing a file atomically: a temporary file in the target's directory, fsync, rename, fsync
of the directory. The new file gets the replaced file's mode (or the umask's), a symlink is
followed to its target, and temporary files of writers that died are removed."""
from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from typing import Callable, IO, Optional

from ..errors import CheckpointFileError

_PREFIX = ".pydepth-"
_OURS = re.compile(r"\.pydepth-(\d+)-[A-Za-z0-9_]+\.tmp\Z")
_LEGACY = re.compile(r"\.pydepth-[A-Za-z0-9_]{8}\.tmp\Z")  # names of writers before the pid was in them
#: A temporary file untouched this long whose writer is gone is an orphan (seconds).
ORPHAN_AGE = 60.0
_LEGACY_AGE = 3600.0


def _umask() -> int:
    try:
        with open("/proc/self/status") as fh:  # reading it leaves the process's umask alone
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # another user's live process, or a pid we cannot judge: keep its file
    return True


def remove_orphans(directory: str) -> None:
    """Deletes temporary files in directory left by writers that died mid-write (their pid is
    gone and the file is a minute old; unnamed legacy temporaries after an hour)."""
    now = time.time()
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        ours, legacy = _OURS.match(name), _LEGACY.match(name)
        if not (ours or legacy):
            continue
        path = os.path.join(directory, name)
        try:
            age = now - os.lstat(path).st_mtime
            if (ours and age > ORPHAN_AGE and not _alive(int(ours.group(1)))) or (legacy and age > _LEGACY_AGE):
                os.unlink(path)
        except OSError:
            continue


def resolve_target(path: str) -> str:
    """The file a write to path replaces: symlinks followed, "" and directories refused."""
    if path == "":
        raise CheckpointFileError("the checkpoint path is empty")
    target = os.path.realpath(path) if os.path.islink(path) else os.path.abspath(path)
    if os.path.isdir(target):
        raise CheckpointFileError(f"{path} is a directory; a checkpoint is a file")
    return target


def _mode(target: str) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # platforms without directory handles (Windows) make the rename durable themselves
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomically(path: str, write: Callable[[IO[bytes]], None], what: str = "checkpoint") -> str:
    """Calls write(file) on a temporary file next to path's target and renames it over the
    target; any OSError (disk full, read-only) becomes CheckpointFileError and leaves the old
    file as it was. Returns the target written."""
    target = resolve_target(path)
    directory = os.path.dirname(target)
    remove_orphans(directory)
    tmp: Optional[str] = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{_PREFIX}{os.getpid()}-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode(target))
        os.replace(tmp, target)
        tmp = None
    except OSError as err:
        reason = err.strerror or str(err)
        msg = f"{target}: {what} not written ({reason}); the previous file, if any, is unchanged"
        raise (CheckpointFileError(err.errno, msg) if err.errno is not None else CheckpointFileError(msg)) from err
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _fsync_directory(directory)
    return target
