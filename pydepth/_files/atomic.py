# SPDX-License-Identifier: MIT
"""Replacing a file atomically, the one writer of every file pydepth writes: a temporary file in
the target's directory, fsync, rename, fsync of the directory. The new file gets the replaced
file's mode (or the umask's); a symlink named by the caller is followed to its target, one in a
directory pydepth owns (``follow_links=False``) is replaced, never written through; temporary
files of writers that died are removed."""
from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from typing import Any, Callable, IO, Optional, Type, Union

from ..errors import CheckpointFileError, PydepthError

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


def resolve_target(path: str, what: str = "checkpoint", error: Type[PydepthError] = CheckpointFileError,
                   follow_links: bool = True) -> str:
    """The file a write to path replaces: symlinks followed unless ``follow_links`` is off (the
    link itself is then replaced), "" and directories refused."""
    if path == "":
        raise error(f"the {what} path is empty")
    target = os.path.realpath(path) if follow_links and os.path.islink(path) else os.path.abspath(path)
    if os.path.isdir(target) and not os.path.islink(target):
        raise error(f"{path} is a directory; a {what} is a file")
    return target


def _mode(target: str) -> int:
    try:
        st = os.lstat(target)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
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


def write_atomically(path: str, write: Callable[[IO[bytes]], Any], what: str = "checkpoint",
                     error: Type[PydepthError] = CheckpointFileError, follow_links: bool = True) -> str:
    """Calls write(file) on a temporary file next to path's target and renames it over the
    target; any OSError (disk full, read-only) becomes ``error`` naming the file and leaves the
    old file as it was. With ``follow_links`` off a symlink at path is replaced by the file.
    Returns the target written."""
    target = resolve_target(os.fspath(path), what, error, follow_links)
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
        raise (error(err.errno, msg) if err.errno is not None and issubclass(error, OSError)
               else error(msg)) from err
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _fsync_directory(directory)
    return target


def write_bytes(path: Union[str, os.PathLike[str]], data: bytes, what: str, error: Type[PydepthError]) -> str:
    """Replaces the file at path (a symlink there replaced, not followed) by data, atomically."""
    return write_atomically(os.fspath(path), lambda fh: fh.write(data), what, error, follow_links=False)
