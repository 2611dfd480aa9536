#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ASan + UBSan: every extension and the shared core under them (module and shared linker flags)
# built with both sanitizers in their own build directory, installed into a throwaway venv that
# sees the CI venv's packages (numpy, pytest, ...) behind its own, and the whole test suite run
# with it and the sanitizer runtimes preloaded (subprocesses the tests start inherit both). Fails
# on a non-zero pytest exit or on any sanitizer report in the output.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python -c "import scikit_build_core, Cython" 2>/dev/null ||
  python -m pip install --quiet "scikit-build-core>=0.10" "cython>=3.0"

python -m venv --without-pip "$work/venv"
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
site="$(purelib "$work/venv/bin/python")"
# every package directory of the CI interpreter, behind the throwaway venv's own
python -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
  > "$site/zz-ci-venv.pth"

san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
python -m pip install --quiet --no-deps --no-build-isolation --target "$site" \
  --config-settings=build-dir="$work/build" \
  --config-settings=cmake.build-type=RelWithDebInfo \
  --config-settings=cmake.define.CMAKE_C_FLAGS="$san" \
  --config-settings=cmake.define.CMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" \
  --config-settings=cmake.define.CMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  "$root"

preload="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
log="$work/pytest.log"
status=0
export LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Run from outside the tree so the sanitized build is the one imported.
(cd "$work" && "$work/venv/bin/python" -c "import pydepth, sys; assert pydepth.__file__.startswith('$site'), pydepth.__file__")
# Left out (tests/README.md says why): tests that exercise other runtimes rather than pydepth's C
# code (jaxlib, Lightning/DDP/W&B/MLflow subprocesses, every transformers family, a Jupyter kernel),
# whole programs whose C calls the unit tests already make (examples, README snippets), and
# Chromium, which the preload would break.
(cd "$work" && "$work/venv/bin/python" -m pytest -q -p no:cacheprovider --durations=10 \
  --ignore-glob="$root/tests/test_jax_*.py" --ignore="$root/tests/test_torch_callbacks.py" \
  --ignore="$root/tests/test_torch_callbacks_hosts.py" --ignore="$root/tests/test_torch_in_step.py" \
  --ignore="$root/tests/test_torch_in_step_ddp.py" --ignore="$root/tests/test_torch_every_causal_lm.py" \
  --ignore="$root/tests/test_torch_parametrizations.py" --ignore="$root/tests/test_train_log_targets.py" \
  --ignore="$root/tests/test_notebook.py" --ignore="$root/tests/test_examples.py" \
  --ignore="$root/tests/test_readme.py" --ignore="$root/tests/test_api_reference.py" \
  -k "not headless_chromium" "$root/tests" 2>&1) | tee "$log" || status=$?
if grep -E -q "runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer|UndefinedBehaviorSanitizer" "$log"; then
  echo "sanitizer report in the test run" >&2
  status=1
fi
exit "$status"
