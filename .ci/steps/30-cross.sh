#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cross-platform runs of the C test programs (tests/c, built by CMake, run by ctest):
# native, aarch64 glibc under qemu-aarch64, x86-64 musl (static, musl-gcc), Windows AMD64
# (zig cc, mingw-w64 ABI) under wine, and macOS arm64 / x86-64 (zig cc: build and link only).
#
# Every run must build, and its kernel_paths, panel_lines and nan_results tests must pass (the NaN results
# of the elementary functions by the rules of their specification). The public_fixtures test must be
# bit-exact on the runs listed in BIT_EXACT_RUNS (every run that executes: the elementary
# functions are pydepth's own, csrc/libm, so musl's and the Windows CRT's libm no longer matter).
# aarch64 runs the fixtures once per kernel path forced (neon, its default, and baseline), and
# its NEON code must hold no fused multiply-add instruction.
set -euo pipefail

BIT_EXACT_RUNS="native aarch64 musl windows"
ALL_RUNS="native aarch64 musl windows macos-arm64 macos-x86_64"
RUNS="${PD_CROSS_RUNS:-$ALL_RUNS}" # a subset, for trying one run by hand

root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
export WINEPREFIX="$work/wineprefix" WINEDEBUG=-all
cleanup() {
  if [ -n "${wineserver:-}" ]; then "$wineserver" -k >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

python=$(command -v python || command -v python3)
jobs=2

fail=0
summary=()

# zig (the ziglang wheel) is the cross compiler for Windows and macOS, through tools/zig-cc
# and tools/zig-ar (the target comes from PD_ZIG_TARGET, set per run below).
need_zig() {
  if ! "$python" -c "import ziglang" 2>/dev/null; then
    "$python" -m pip install --quiet "ziglang>=0.13"
  fi
  export PD_PYTHON="$python"
}

find_wine() {
  for w in wine64 /usr/lib/wine/wine64 /usr/lib64/wine/wine64 wine; do
    if command -v "$w" >/dev/null 2>&1; then wine=$(command -v "$w"); break; fi
  done
  [ -n "${wine:-}" ] || { echo "wine64 not found" >&2; return 1; }
  wineserver=$(command -v wineserver || echo "$(dirname "$wine")/wineserver")
}

configure_args() { # the CMake cache entries of one run
  case "$1" in
    native) ;;
    aarch64)
      echo "-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64"
      echo "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc"
      echo "-DCMAKE_CROSSCOMPILING_EMULATOR=qemu-aarch64;-L;/usr/aarch64-linux-gnu" ;;
    musl)
      echo "-DCMAKE_C_COMPILER=musl-gcc -DCMAKE_EXE_LINKER_FLAGS=-static" ;;
    windows)
      echo "-DCMAKE_SYSTEM_NAME=Windows -DCMAKE_SYSTEM_PROCESSOR=AMD64"
      echo "-DCMAKE_C_COMPILER=$root/tools/zig-cc"
      echo "-DCMAKE_AR=$root/tools/zig-ar -DCMAKE_RANLIB=$root/tools/zig-ranlib"
      echo "-DCMAKE_CROSSCOMPILING_EMULATOR=$wine" ;;
    macos-arm64 | macos-x86_64)
      echo "-DCMAKE_SYSTEM_NAME=Darwin -DCMAKE_SYSTEM_PROCESSOR=${1#macos-}"
      echo "-DCMAKE_C_COMPILER=$root/tools/zig-cc"
      echo "-DCMAKE_AR=$root/tools/zig-ar -DCMAKE_RANLIB=$root/tools/zig-ranlib" ;;
  esac
}

bit_exact_required() { case " $BIT_EXACT_RUNS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# The kernel paths a run's fixtures are forced to, one fixture run each ("" = the default path).
forced_paths() { case "$1" in aarch64) echo "neon baseline" ;; *) echo "" ;; esac; }

# aarch64's NEON code (the micro-kernel object and every *_neon loop of the core, csrc/libm
# apart) holds no fused multiply-add: fmla/fmls (vector) nor fmadd/fmsub/fnmadd/fnmsub (scalar).
no_fused_neon() {
  local objdump=aarch64-linux-gnu-objdump objs
  command -v "$objdump" >/dev/null || { echo "$objdump not found (binutils-aarch64-linux-gnu)" >&2; return 1; }
  objs=$(find "$1/CMakeFiles/pdcore.dir/csrc" -name '*.c.o' ! -path '*/libm/*' | sort)
  # shellcheck disable=SC2086
  "$objdump" -d --no-show-raw-insn $objs | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = $2; if (fn ~ /_neon/) seen++; next }
    fn ~ /_neon/ && $2 ~ /^f(n)?m(la|ls|add|sub)$/ { print "fused in " fn ": " $0; bad = 1 }
    END {
      if (seen < 2) { print "no NEON functions found (" seen ")"; exit 1 }
      if (!bad) print seen " NEON functions, no fused multiply-add"; exit bad
    }'
}

for run in $RUNS; do
  case "$run" in
    windows) need_zig; export PD_ZIG_TARGET=x86_64-windows-gnu ;;
    macos-arm64) need_zig; export PD_ZIG_TARGET=aarch64-macos ;;
    macos-x86_64) need_zig; export PD_ZIG_TARGET=x86_64-macos ;;
  esac
  [ "$run" = windows ] && find_wine
  build="$work/build-$run"
  echo "== cross run: $run" >&2
  # shellcheck disable=SC2046
  if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release $(configure_args "$run") >"$build.log" 2>&1 ||
     ! cmake --build "$build" -j "$jobs" >>"$build.log" 2>&1; then
    cat "$build.log" >&2
    summary+=("$run: BUILD FAILED")
    fail=1
    continue
  fi
  case "$run" in
    macos-*)
      kind=$(file -b "$build/tests/c/pd_fixture_check" 2>/dev/null | cut -d, -f1 || true)
      summary+=("$run: built and linked (${kind:-pd_fixture_check, pd_kernel_check})")
      continue ;;
  esac
  # The product paths, their tiles' asks (the next tile's C, the next panel's lines) and RoPE's
  # finiteness report never depend on libm: required on every run.
  if ! (cd "$build" && ctest --output-on-failure -R 'kernel_paths|panel_lines|rope_noting') >"$build.kernels" 2>&1; then
    cat "$build.kernels" >&2
    summary+=("$run: kernel_paths, panel_lines or rope_noting FAILED")
    fail=1
  fi
  if [ "$run" = aarch64 ]; then
    if fused=$(no_fused_neon "$build" 2>&1); then summary+=("$run: $fused")
    else echo "$fused" >&2; summary+=("$run: fused multiply-add in NEON code FAILED"); fail=1; fi
  fi
  # NaN results by the rules of docs/numerics-elementary.md §10 (the created NaN is 0xfff8...
  # on every CPU; both builds on x86-64): required on every run.
  if (cd "$build" && ctest -V -R nan_results) >"$build.nans" 2>&1; then
    summary+=("$run: NaN results follow spec §10 ($(sed -nE 's/^[0-9]+: nan results: ([0-9]+) checked.*FMA=([^)]*)\)$/\1 with PYDEPTH_LIBM_FMA=\2/p' "$build.nans" | paste -sd ';' -))")
  else
    grep -E "FAIL|nan results" "$build.nans" >&2 || cat "$build.nans" >&2
    summary+=("$run: NaN results BREAK spec §10")
    fail=1
  fi
  forced_list=$(forced_paths "$run")
  for forced in ${forced_list:-""}; do # one pass per forced path, or one on the default path
    label="$run${forced:+ (forced $forced)}"
    set +e
    (cd "$build" && PYDEPTH_KERNEL_PATH="$forced" ctest -V -R public_fixtures) >"$build.ctest" 2>&1
    rc=$?
    sed -nE 's/^[0-9]+: //p' "$build.ctest" >"$build.fixtures" # the program's own output
    set -e
    verdict=$(grep -E "^(all public fixtures bit-exact|FAILED)$" "$build.fixtures" | tail -1)
    path=$(grep -m1 "^kernel path" "$build.fixtures" || true)
    if [ -n "$forced" ] && [ "$path" != "kernel path $forced" ]; then
      cat "$build.ctest" >&2
      summary+=("$label: ran on '$path', not the forced path")
      fail=1
    elif [ "$rc" -eq 0 ]; then
      summary+=("$label: $verdict ($path)")
    elif bit_exact_required "$run"; then
      cat "$build.ctest" >&2
      summary+=("$label: public fixtures DIFFER (required bit-exact)")
      fail=1
    else
      grep -E "^(ok  |FAIL)" "$build.fixtures" | head -n 6 >&2 || true
      grep -m1 "^  FAIL" "$build.fixtures" >&2 || true
      summary+=("$label: public fixtures differ [not in BIT_EXACT_RUNS: not required] ($path; first: $(grep -m1 '^  FAIL' "$build.fixtures" | sed 's/^  FAIL //'))")
    fi
  done
done

echo "== cross runs (bit-exact required: $BIT_EXACT_RUNS)" >&2
for line in "${summary[@]}"; do echo "   $line" >&2; done
exit "$fail"
