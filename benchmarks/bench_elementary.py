# SPDX-License-Identifier: MIT
"""Speed of pydepth's elementary functions against glibc's, in C (no Python in the timed loops).

    python benchmarks/bench_elementary.py [--n 50000] [--repeat 31]

Builds a small C program from csrc/libm (the core's flags: -O3 -ffp-contract=off) linked with
the platform libm, and times per element, as the median of --repeat passes over n inputs:
glibc's exp, pydepth's scalar exp (FMA build, and the build without FMA instructions that CPUs
without FMA run), pydepth's array exp on each of its paths this CPU has (avx512-fma, avx2-fma,
scalar; the paths' passes interleaved, so load from other processes falls on all of them alike),
then the other functions against glibc. Inputs for exp are in [-30, 0], like a softmax's shifted logits. The
CPU is shared: compare ratios within one run, not numbers across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

_SOURCE = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "libm/pd_libm.h"
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y);
}
static size_t n; static int reps; static double *x, *y, *t;
static double glibc_pow(double v) { return pow(10000.0, v); }
static double pd_pow_rope(double v) { return pd_pow(10000.0, v); }
static void report(const char *name, double (*f)(double), void (*arr)(size_t, const double *, double *)) {
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (arr) arr(n, x, y); else for (size_t i = 0; i < n; i++) y[i] = f(x[i]);
        t[r] = (now() - t0) / (double)n * 1e9;
    }
    qsort(t, reps, sizeof *t, cmp);
    printf("{\"name\": \"%s\", \"ns\": %.4f}\n", name, t[reps / 2]);
}
/* The array exp's paths, one pass of each in turn, so a change of load falls on all of them. */
static void report_paths(void) {
    const char *names[] = {"avx512-fma", "avx2-fma", "scalar"};
    double *tp[3];
    int ok[3];
    for (int p = 0; p < 3; p++) {
        ok[p] = pd_force_exp_array_path(names[p]);
        tp[p] = malloc(reps * sizeof *tp[p]);
    }
    for (int r = 0; r < reps; r++)
        for (int p = 0; p < 3; p++) {
            if (!ok[p]) continue;
            pd_force_exp_array_path(names[p]);
            double t0 = now();
            pd_exp_array(n, x, y);
            tp[p][r] = (now() - t0) / (double)n * 1e9;
        }
    for (int p = 0; p < 3; p++) {
        if (!ok[p]) continue;
        qsort(tp[p], reps, sizeof *tp[p], cmp);
        printf("{\"name\": \"pydepth exp array (%s path)\", \"ns\": %.4f}\n", names[p], tp[p][reps / 2]);
    }
}
static void fill(double lo, double hi) {
    srand(7); for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rand() / RAND_MAX;
}
int main(int argc, char **argv) {
    n = (size_t)atol(argv[1]); reps = atoi(argv[2]);
    const char *which = argv[3];
    x = malloc(n * sizeof *x); y = malloc(n * sizeof *y); t = malloc(reps * sizeof *t);
    fill(-30.0, 0.0);
    if (!strcmp(which, "exp")) {
        report("glibc exp", exp, 0);
        report("pydepth exp (scalar)", pd_exp, 0);
        report_paths();
    } else if (!strcmp(which, "exp-nofma")) {
        report("pydepth exp (scalar, no FMA instructions)", pd_exp, 0);
    } else {
        fill(1e-3, 1e3); report("glibc log", log, 0); report("pydepth log", pd_log, 0);
        fill(0.0, 100.0); report("glibc log1p", log1p, 0); report("pydepth log1p", pd_log1p, 0);
        fill(-1e5, 1e5); report("glibc sin", sin, 0); report("pydepth sin", pd_sin, 0);
        report("glibc cos", cos, 0); report("pydepth cos", pd_cos, 0);
        fill(-1.0, 0.0); report("glibc pow(10000, y)", glibc_pow, 0); report("pydepth pow(10000, y)", pd_pow_rope, 0);
    }
    return 0;
}
"""


def build(directory: pathlib.Path) -> pathlib.Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("no C compiler")
    src = directory / "bench_elementary.c"
    src.write_text(_SOURCE)
    exe = directory / "bench_elementary"
    libm = ROOT / "csrc" / "libm"
    sources = sorted(str(p) for p in [*libm.glob("*.c"), *(libm / "tables").glob("*.c")])
    sources.append(str(ROOT / "csrc" / "platform" / "pd_cpu.c"))
    subprocess.run(
        [
            cc,
            "-O3",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-std=c11",
            "-D_POSIX_C_SOURCE=200809L",
            "-I",
            str(ROOT / "csrc"),
            "-o",
            str(exe),
            str(src),
            *sources,
            "-lm",
        ],
        check=True,
    )
    return exe


def run(exe, n, repeat, which, env=None):
    out = subprocess.run(
        [str(exe), str(n), str(repeat), which], check=True, capture_output=True, text=True, env=env
    ).stdout
    return [json.loads(line) for line in out.splitlines()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000, help="inputs per pass")
    ap.add_argument("--repeat", type=int, default=31, help="passes; the median is reported")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(pathlib.Path(tmp))
        rows = run(exe, args.n, args.repeat, "exp")
        rows += run(exe, args.n, args.repeat, "exp-nofma", dict(os.environ, PYDEPTH_LIBM_FMA="0"))
        rows += run(exe, args.n, args.repeat, "others")
    glibc = {r["name"].split(" ", 1)[1].split(" (")[0]: r["ns"] for r in rows if r["name"].startswith("glibc")}
    print(f"n = {args.n}, median of {args.repeat} passes, ns per element")
    for r in rows:
        fn = r["name"].split(" ", 1)[1].split(" (")[0].replace("exp array", "exp")
        ratio = "" if r["name"].startswith("glibc") else f"  ({r['ns'] / glibc[fn]:.2f} x glibc)"
        print(f"  {r['name']:44} {r['ns']:7.2f}{ratio}")
    paths = {r["name"]: r["ns"] for r in rows}
    wide, narrow = "pydepth exp array (avx512-fma path)", "pydepth exp array (avx2-fma path)"
    if wide in paths and narrow in paths:
        print(f"  avx512-fma path / avx2-fma path: {paths[wide] / paths[narrow]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
