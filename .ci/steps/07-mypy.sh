#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Type-check pydepth/ with the one configuration in pyproject.toml ([tool.mypy]: Python 3.9, every
# function annotated). mypy 1.19 is the last release that still targets Python 3.9.
# Run from the repository root with the CI venv active; exits non-zero on any finding.
set -euo pipefail
python -m pip install --quiet 'mypy==1.19.1'
mypy
