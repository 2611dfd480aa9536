# SPDX-License-Identifier: MIT
"""The ``pydepth`` command line: one module per subcommand, each with ``register`` and ``run``.

Exit codes: 0 success; 1 a refused input or a failed self-check (message on stderr);
2 usage errors and a missing optional dependency (``--plot`` without matplotlib); 130 Ctrl-C;
141 (128 + SIGPIPE, silently) when the reader of stdout went away (``pydepth demo | head -3``).
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from types import ModuleType
from typing import Any, Optional, Sequence

from ._args import error, file_error
from ._flags import add_retired
from .._version import __version__

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

#: The subcommands, each a module of this package of the same name, in the order of ``--help``.
SUBCOMMANDS = (
    "demo",
    "observe",
    "trace",
    "laptop",
    "train",
    "verify",
    "sweep",
    "depth-check",
    "depth-transfer",
    "audit",
    "report",
)

#: The exit codes of every subcommand, as its --help states them.
EXIT_CODES = ("Exit status: 0 success; 1 a refused input or a failed check; 2 a usage error or a missing "
              "optional extra; 130 interrupted (Ctrl-C); 141 the reader of stdout went away; "
              "143 terminated (SIGTERM; train checkpoints first).")


class Terminated(KeyboardInterrupt):
    """SIGTERM outside a training loop: stops the command like Ctrl-C, with status 143."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name.replace('-', '_')}")


def _version() -> str:
    from .._native._runtime import kernel_path
    return f"pydepth {__version__} (core kernels: {kernel_path()})"


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="pydepth", description="Depth-scaled initialization and residual health of small "
        "float64 decoders (chapter 6).", epilog="Run 'pydepth COMMAND --help' for a command's options. " + EXIT_CODES)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        _module(name).register(sub)
    for name, command in sub.choices.items():  # the same exit codes, --quiet and retired names everywhere
        command.epilog = f"{command.epilog} {EXIT_CODES}" if command.epilog else EXIT_CODES
        if "--quiet" not in command._option_string_actions:
            command.add_argument("--quiet", action="store_true", help="no progress or 'wrote' lines on stderr")
        add_retired(name, command)
    return parser


_EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a tool ended by SIGPIPE


def _stdout_reader_gone() -> bool:
    """True when stdout is a pipe whose reading end is closed (or that cannot be told apart)."""
    try:
        import select
        fd = sys.stdout.fileno()
        poller = select.poll()
    except (AttributeError, ValueError, OSError):  # no poll (Windows) or no real stdout: trust the error
        return True
    poller.register(fd, 0)  # POLLERR and POLLHUP are always reported
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _silence_stdout() -> None:
    """Points stdout at devnull, so the interpreter's final flush does not fail a second time."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line; returns the exit code."""
    from ..errors import PydepthError
    args = build_parser().parse_args(argv)
    on_main = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM")
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main else None
    try:
        code = int(_module(args.command).run(args) or 0)
        sys.stdout.flush()  # a closed pipe surfaces here, not as a traceback at interpreter exit
        return code
    except BrokenPipeError as err:
        if not _stdout_reader_gone():
            error(str(err))  # some other pipe or socket broke: that is a real error
            return 1
        _silence_stdout()
        return _EXIT_BROKEN_PIPE
    except OSError as err:
        error(file_error(err))
        return 1
    except (PydepthError, ValueError) as err:
        error(str(err))
        return 1
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: a one-line note and the shell's usual status
        error("terminated" if isinstance(err, Terminated) else "interrupted")
        return 143 if isinstance(err, Terminated) else 130
    finally:
        if on_main:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
