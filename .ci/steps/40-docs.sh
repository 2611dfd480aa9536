#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the documentation site (mkdocs.yml: README, guides, and the API reference generated from
# every __all__) with warnings as errors. Installs the `docs` extra's packages only: a
# `pip install '.[docs]'` would rebuild pydepth, which the CI venv already holds.
# Run from the repository root with the CI venv active; exits non-zero on any warning.
set -euo pipefail
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python - >"$work/requirements.txt" <<'PY'
import tomllib  # Python 3.11+, the CI venv's Python

with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["docs"]))
PY
python -m pip install --quiet -r "$work/requirements.txt"
# the mkdocs command, not `python -m mkdocs`, which would import ./pydepth, the unbuilt tree
NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet --site-dir "$work/site"
echo "docs: $(find "$work/site" -name index.html | wc -l) pages built with no warning" >&2
