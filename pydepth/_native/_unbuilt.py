# SPDX-License-Identifier: MIT
"""The message for an import of pydepth whose compiled core is missing (an unbuilt source tree)."""
from __future__ import annotations

import os
import sys
from typing import NoReturn


def unbuilt_core(init_file: str) -> NoReturn:
    """Explains how to get a built pydepth; exits with status 1 under ``python -m pydepth``
    (no traceback), else raises :class:`ImportError` with the same text."""
    package = os.path.dirname(os.path.abspath(init_file))
    root = os.path.dirname(package)
    in_checkout = os.path.exists(os.path.join(root, "pyproject.toml"))
    where = (f"Python imported pydepth's source tree {package} (it comes first on sys.path when you "
             f"run from {root}), which has no compiled core" if in_checkout
             else f"the installed package at {package} has no compiled core")
    message = (f"pydepth's compiled core (the extensions in pydepth._native) is missing: {where}.\n"
               "Build and install it with `pip install .` from the checkout, then run `pydepth ...` "
               "or `python -m pydepth ...` from any other directory (cd out of the checkout first).")
    if sys.argv and sys.argv[0] == "-m":  # `python -m pydepth` is still locating its __main__
        sys.stderr.write(f"pydepth: error: {message}\n")
        raise SystemExit(1)
    raise ImportError(message) from None
