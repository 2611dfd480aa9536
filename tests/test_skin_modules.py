# SPDX-License-Identifier: MIT
"""The skin's extensions share one compiled core: the thread pool, the kernel path and the
interrupt hook that one module sets are the ones every other module's C calls use."""
import ctypes
import shutil
import subprocess
import sys

import pytest

import pydepth
from conftest import native_binaries
from pydepth._native import _runtime

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("nm") is None,
                                reason="reads ELF symbol tables with nm")


def _defined(binary):
    out = subprocess.run(["nm", "-D", "--defined-only", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def _core_library():
    found = [p for p in native_binaries() if p.name.startswith("libpydepth_core")]
    assert len(found) == 1, native_binaries()
    return found[0]


def test_no_skin_extension_carries_its_own_copy_of_the_core():
    core = _core_library()
    assert "pd_set_num_threads" in _defined(core) and "pd_graph_forward" in _defined(core)
    copies = {p.name: sorted(s for s in _defined(p) if s.startswith("pd_"))
              for p in native_binaries() if p != core}
    assert len(copies) >= 8 and all(v == [] for v in copies.values()), copies


def test_the_thread_count_a_skin_module_sets_is_the_shared_cores():
    core = ctypes.CDLL(str(_core_library()))  # the loaded library itself: dlopen returns the same handle
    before = pydepth.get_num_threads()
    try:
        for n in (3, 1):
            _runtime.set_num_threads(n)
            assert core.pd_get_num_threads() == n
    finally:
        pydepth.set_num_threads(before)


@pytest.mark.skipif(shutil.which("readelf") is None, reason="reads ELF relocations with readelf")
def test_the_core_calls_its_own_functions_directly_not_through_its_plt():
    # a register tile asks gemm.c for its broadcast spelling once per call: a PLT jump each time
    relocs = subprocess.run(["readelf", "-rW", str(_core_library())], capture_output=True, text=True,
                            check=True).stdout
    slots = [line.split()[4] for line in relocs.splitlines() if "JUMP_SLOT" in line and len(line.split()) > 4]
    assert any(s.startswith("malloc") for s in slots), slots  # the C library's calls still bind at load
    assert [s for s in slots if s.startswith("pd_")] == []
