#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The suite with only the 'test' extra: a fresh venv without torch, transformers, Dask or
# matplotlib must pass, each test that needs one of them skipping with the extra's name.
# Run from the repository root with the CI venv active (its build tools build the wheel once).
set -euo pipefail
root="$(pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# PYDEPTH_WHEEL: a wheel of this checkout already built (skips the build here).
wheel="${PYDEPTH_WHEEL:-}"
if [ -z "$wheel" ]; then
  python -c "import scikit_build_core, Cython" 2>/dev/null ||
    python -m pip install --quiet scikit-build-core cython
  python -m pip wheel --quiet --no-build-isolation --no-deps -w "$work/wheel" "$root"
  wheel="$(ls "$work"/wheel/pydepth-*.whl)"
fi

python -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet "$wheel[test]"
"$work/venv/bin/python" - "$root/tests" <<'EOF'
import importlib.util, sys
sys.path.insert(0, sys.argv[1])
from conftest import EXTRAS  # the tests' own table of extras and their modules
found = [m for modules in EXTRAS.values() for m in modules if importlib.util.find_spec(m)]
sys.exit(f"the bare venv has optional modules installed: {found}" if found else 0)
EOF

# CI=true turns a missing extra into a failure (tests/conftest.py); here missing extras are the point.
cd "$work"  # import the installed package, not ./pydepth
env -u CI "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests" | tee "$work/log"
grep -q "needs the 'torch' extra" "$work/log" ||
  { echo "no test skipped for the missing torch extra: the skips were not exercised" >&2; exit 1; }
