"""Peak memory of one benchmark phase (part of bench.py): CUDA allocated bytes, or the process's
peak RSS on CPU.

Shapes: none.
"""

from __future__ import annotations

import ctypes
import gc
import resource
import sys

import torch


class PeakMemory:
    """Peak memory of one phase: CUDA allocated bytes, or the process's peak RSS on CPU.

    On Linux, writing "5" to /proc/self/clear_refs resets the peak RSS (VmHWM) to the current
    RSS, so each phase gets its own peak; elsewhere the peak since the process started
    (ru_maxrss) is all there is, and `kind` says so.
    """

    def __init__(self, device: torch.device):
        self.device = device
        if device.type == "cuda":
            self.kind = "cuda_max_memory_allocated"
        elif self._reset_rss():
            self.kind = "rss_peak_of_phase"
        else:
            self.kind = "rss_peak_since_start"
        self.start_mb = 0.0

    @staticmethod
    def _reset_rss() -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")
            return True
        except OSError:
            return False

    @staticmethod
    def _status_mb(field: str) -> float | None:
        try:
            with open("/proc/self/status") as handle:
                for line in handle:
                    if line.startswith(field + ":"):
                        return int(line.split()[1]) / 1024  # kB -> MiB
        except OSError:
            pass
        return None

    def current_mb(self) -> float:
        if self.device.type == "cuda":
            return torch.cuda.memory_allocated(self.device) / 2**20
        rss = self._status_mb("VmRSS")
        return rss if rss is not None else self._maxrss_mb()

    @staticmethod
    def _maxrss_mb() -> float:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024

    @staticmethod
    def _release_freed() -> None:
        """Return freed heap pages to the OS (glibc), so a phase's RSS growth is its own."""
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass

    def reset(self) -> None:
        """Start a phase."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._release_freed()
            if self.kind == "rss_peak_of_phase":
                self._reset_rss()
        self.start_mb = self.current_mb()

    def report(self) -> dict[str, float]:
        """Peak of the phase and its growth over the memory in use when the phase began (MiB)."""
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            hwm = self._status_mb("VmHWM") if self.kind == "rss_peak_of_phase" else None
            peak = hwm if hwm is not None else self._maxrss_mb()
        return {"peak_mem_mb": round(peak, 1), "mem_growth_mb": round(max(peak - self.start_mb, 0.0), 1)}
