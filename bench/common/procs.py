"""What the benchmarks read of processes from ``/proc`` (Linux): a process's children, its resident
memory and the CPU time of a process tree."""

from __future__ import annotations

import os
from pathlib import Path


def children(pid: int) -> list[int]:
    """The process ids whose parent is ``pid``."""
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid:
                kids.append(int(entry.name))
    return kids


def tree_cpu_s(pid: int | None = None) -> float:
    """CPU seconds (user + system) of a process and all its descendants, with those of children
    that have exited (Chromium's renderers come and go), as far as the kernel has reaped them."""
    pid = pid or os.getpid()
    total, stack, tick = 0, [pid], os.sysconf("SC_CLK_TCK")
    while stack:
        p = stack.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        stack += children(p)
    return total / tick


def rss_mb(pid: int) -> float:
    """A process's resident memory (``VmRSS``) in MB, to 0.1; NaN if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")
