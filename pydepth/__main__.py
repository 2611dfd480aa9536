# SPDX-License-Identifier: MIT
"""``python -m pydepth``: the same command line as the ``pydepth`` console script."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
