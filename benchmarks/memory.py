"""Peak-memory measurement shared by the benchmarks (Linux ``/proc``; harmless elsewhere).

The kernel keeps a process's peak RSS (``VmHWM``); writing ``5`` to ``/proc/<pid>/clear_refs``
resets it to the current RSS, so the peak of one phase can be read after it. Before a reset, freed
memory should go back to the OS (``gc.collect``, :func:`malloc_trim`), or a phase could reuse it
unseen.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re

__all__ = ["clear_refs", "malloc_trim", "status_kib"]


def status_kib(pid: int | str, field: str) -> int:
    """``field`` (``VmRSS``, ``VmHWM`` ...) of ``/proc/<pid>/status`` in KiB; 0 if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            match = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.MULTILINE)
    except OSError:
        return 0
    return int(match.group(1)) if match else 0


def clear_refs(pid: int | str) -> bool:
    """Reset the peak RSS of ``pid`` (``"self"``: this process); False where that is not permitted."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def malloc_trim() -> None:
    """glibc's ``malloc_trim(0)``: return the free heap to the OS (no-op without glibc)."""
    name = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    if trim is not None:
        trim(0)
