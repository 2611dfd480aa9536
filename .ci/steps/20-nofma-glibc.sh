#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The bit-exact tests under glibc WITHOUT its FMA/AVX2 code paths (what a CPU without FMA runs):
# pydepth computes its own exp/log/log1p/sin/cos/pow, so the trace must not change by a bit.
# Run from the repository root with the CI venv active; exits non-zero on any difference.
set -euo pipefail
root="$(pwd)"
nofma="glibc.cpu.hwcaps=-AVX2,-FMA,-AVX,-FMA4"  # the spelling glibc 2.36 honours (issue #12)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"  # import the installed package, not ./pydepth

# 1. The tunable must really switch glibc's variant, or this job would prove nothing.
probe='import math, random, struct, sys
rng = random.Random(5)
sys.stdout.write("".join(struct.pack("<d", math.exp(-60.0 * rng.random())).hex() for _ in range(200000)))'
with_fma="$(env -u GLIBC_TUNABLES python -c "$probe" | sha256sum)"
without_fma="$(GLIBC_TUNABLES="$nofma" python -c "$probe" | sha256sum)"
if [ "$with_fma" = "$without_fma" ]; then
  echo "GLIBC_TUNABLES=$nofma did not change glibc's exp: cannot test the no-FMA build here" >&2
  exit 1
fi

bitexact=(test_trace.py test_reference_impl.py test_construction.py test_depth_init.py
          test_health.py test_demo.py test_gqa.py test_elementary.py)
# 2. The bit-exact tests as shipped (the elementary-function oracle itself runs without the
#    tunable: tests/glibc_oracle.py strips it, the oracle must be the FMA build).
GLIBC_TUNABLES="$nofma" python -m pytest -q -p no:cacheprovider "${bitexact[@]/#/$root/tests/}"
# 3. The trace again on the paths a CPU without FMA/AVX2 takes inside pydepth as well.
GLIBC_TUNABLES="$nofma" PYDEPTH_LIBM_FMA=0 PYDEPTH_EXP_PATH=scalar PYDEPTH_KERNEL_PATH=baseline \
  python -m pytest -q -p no:cacheprovider "$root/tests/test_trace.py" "$root/tests/test_reference_impl.py"
