#!/usr/bin/env bash
# Lint for real errors only (pyflakes F: undefined and unused names; E9: syntax), seconds.
# Run from the repository root with the CI venv active; exits non-zero on any finding.
set -euo pipefail
python -m pip install --quiet 'ruff==0.17.6'
ruff check --select F,E9 pydepth tests benchmarks examples
