# SPDX-License-Identifier: MIT
"""Peak resident memory of this process, on Linux, macOS and Windows."""
from __future__ import annotations

import sys


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    if sys.platform == "win32":
        return _windows_peak_working_set() / 2.0**20
    import resource  # POSIX only
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # getrusage reports KiB on Linux and the BSDs, bytes on macOS
    return peak / 2.0**20 if sys.platform == "darwin" else peak / 1024.0


def _windows_peak_working_set() -> int:
    """PROCESS_MEMORY_COUNTERS.PeakWorkingSetSize of this process, in bytes."""
    import ctypes
    from ctypes import wintypes

    class Counters(ctypes.Structure):
        _fields_ = [("cb", wintypes.DWORD), ("PageFaultCount", wintypes.DWORD)] + [
            (name, ctypes.c_size_t) for name in (
                "PeakWorkingSetSize", "WorkingSetSize", "QuotaPeakPagedPoolUsage",
                "QuotaPagedPoolUsage", "QuotaPeakNonPagedPoolUsage", "QuotaNonPagedPoolUsage",
                "PagefileUsage", "PeakPagefileUsage")]

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    kernel32.GetCurrentProcess.restype = wintypes.HANDLE
    kernel32.K32GetProcessMemoryInfo.argtypes = [wintypes.HANDLE, ctypes.POINTER(Counters), wintypes.DWORD]
    kernel32.K32GetProcessMemoryInfo.restype = wintypes.BOOL
    counters = Counters()
    counters.cb = ctypes.sizeof(Counters)
    if not kernel32.K32GetProcessMemoryInfo(kernel32.GetCurrentProcess(), ctypes.byref(counters), counters.cb):
        raise OSError(ctypes.get_last_error(), "GetProcessMemoryInfo failed")  # type: ignore[attr-defined]
    return int(counters.PeakWorkingSetSize)
