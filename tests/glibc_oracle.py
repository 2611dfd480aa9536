# SPDX-License-Identifier: MIT
"""The platform C library's own exp/log/log1p/sin/cos/pow, as the oracle for pydepth.elementary.

A tiny C program (compiled once per session with the system compiler) streams float64 inputs
through libm in a subprocess started WITHOUT ``GLIBC_TUNABLES``, so the oracle is the build glibc
selects on this CPU by default (the FMA variants here) even when the tests run under a tunable.
numpy's ufuncs are not used: they may carry their own SIMD implementations.
"""
from __future__ import annotations

import os
import pathlib
import platform
import shutil
import subprocess

import numpy as np

FUNCTIONS = ("exp", "log", "log1p", "sin", "cos", "pow", "fma")

_SOURCE = r"""
#include <math.h>
#include <stdio.h>
#include <string.h>
#define CHUNK 65536
int main(int argc, char **argv) {
    static double in[3 * CHUNK], out[CHUNK];
    const char *f = argc > 1 ? argv[1] : "";
    const int pw = strcmp(f, "pow") == 0, fm = strcmp(f, "fma") == 0, width = fm ? 3 : pw ? 2 : 1;
    double (*g)(double) = !strcmp(f, "exp") ? exp : !strcmp(f, "log") ? log
                        : !strcmp(f, "log1p") ? log1p : !strcmp(f, "sin") ? sin
                        : !strcmp(f, "cos") ? cos : 0;
    if (!g && !pw && !fm) return 2;
    size_t n;
    while ((n = fread(in, sizeof(double) * width, CHUNK, stdin)) > 0) {
        for (size_t i = 0; i < n; i++)
            out[i] = fm ? fma(in[3 * i], in[3 * i + 1], in[3 * i + 2])
                   : pw ? pow(in[2 * i], in[2 * i + 1]) : g(in[i]);
        if (fwrite(out, sizeof(double), n, stdout) != n) return 3;
    }
    return 0;
}
"""


def platform_is_reference() -> str | None:
    """None if this platform's libm is the reference (glibc >= 2.28 on x86-64 with FMA, or
    aarch64), else the reason it is not."""
    libc, version = platform.libc_ver()
    if libc != "glibc":
        return f"the C library is {libc or 'not glibc'}"
    if tuple(int(p) for p in version.split(".")[:2]) < (2, 28):
        return f"glibc {version} predates the 2.28 algorithms"
    machine = platform.machine()
    if machine == "aarch64":
        return None
    if machine != "x86_64":
        return f"machine {machine}"
    flags = pathlib.Path("/proc/cpuinfo").read_text().split()
    if "fma" not in flags or "avx2" not in flags:
        return "this x86-64 CPU lacks FMA/AVX2, so glibc runs its non-FMA variants"
    return None


def build(directory: pathlib.Path) -> pathlib.Path | None:
    """Compile the oracle program into directory; None if there is no C compiler."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src = directory / "glibc_oracle.c"
    exe = directory / "glibc_oracle"
    src.write_text(_SOURCE)
    subprocess.run([cc, "-O1", "-fno-builtin", "-o", str(exe), str(src), "-lm"], check=True)
    return exe


def evaluate(exe: pathlib.Path, name: str, x: np.ndarray, y: np.ndarray | None = None,
             z: np.ndarray | None = None) -> np.ndarray:
    """name(x) (or pow(x, y), fma(x, y, z)) elementwise by the platform libm, as a new array."""
    if name not in FUNCTIONS:
        raise ValueError(f"unknown function {name!r}")
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    columns = [x] + [np.broadcast_to(v, x.shape) for v in (y, z) if v is not None]
    data = np.stack(columns, axis=1).reshape(-1)
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    done = subprocess.run([str(exe), name], input=np.ascontiguousarray(data).tobytes(),
                          capture_output=True, check=True, env=env)
    out = np.frombuffer(done.stdout, dtype=np.float64)
    if out.size != x.size:
        raise RuntimeError(f"oracle returned {out.size} values for {x.size} inputs")
    return out.copy()
