#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Lint with the one configuration in pyproject.toml ([tool.ruff]: rules, line length, target Python).
# Run from the repository root with the CI venv active; exits non-zero on any finding.
set -euo pipefail
python -m pip install --quiet 'ruff==0.17.6'
ruff check pydepth tests benchmarks examples
