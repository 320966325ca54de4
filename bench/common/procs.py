"""What the benchmarks read of processes: from ``/proc`` (Linux), a process's children, its resident
memory and the CPU time of a process tree; a command's peak RSS and seconds under GNU time
(:func:`timed`); the environment that runs another worktree's packages (:func:`code_env`); the
machine a figure was measured on (:func:`machine`)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def machine() -> str:
    """The CPU's model name, its cores, how it computes in bfloat16 (AMX matrix units, AVX512-BF16
    or emulated: "auto" dtypes follow it), and Python: what a wall time depends on (two "AMD EPYC"
    machines here differed in it; docs/real-models.md compares CPUs with and without AMX)."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    name = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    flags = set(m.group(1).split()) if (m := re.search(r"^flags\s*:(.*)$", info, re.M)) else set()
    kinds = {"amx_tile": "AMX", "avx512_bf16": "AVX512-BF16"}
    bf16 = next(
        (v for k, v in kinds.items() if k in flags), "bfloat16 emulated" if flags else "bfloat16 unknown"
    )
    cpu = name.group(1).strip() if name else platform.processor() or platform.machine()
    return f"{cpu}, {bf16}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def children_of() -> dict[int, list[int]]:
    """Every running process's children, by parent id: one pass over ``/proc``."""
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def children(pid: int) -> list[int]:
    """The process ids whose parent is ``pid``."""
    return children_of().get(pid, [])


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


PACKAGES = ("agentgym-core", "agentgym-train", "agentgym-env-babyai", "agentgym-env-textcraft")


def tree_pss_mb(pid: int) -> float:
    """The memory of a process and all its descendants together (a recipe's Python with its env's
    JVMs or browsers), in MB: their proportional set sizes, so pages they share (Chromium's) count
    once; 0 once it is gone. One pass over ``/proc`` finds the tree."""
    kids = children_of()
    total, stack = 0.0, [pid]
    while stack:
        p = stack.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) / 1024
                    break
        except OSError:  # gone meanwhile
            pass
        stack += kids.get(p, [])
    return total


def timed(
    cmd: list[str],
    env: dict[str, str],
    log: Path,
    cwd: Path | None = None,
    on_sample: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run ``cmd`` (in ``cwd``) under GNU time; its peak RSS (GB: the largest process's, GNU
    time's), the peak of its whole tree's memory (``peak_tree_gb``: with the JVMs or browsers it
    starts, :func:`tree_pss_mb` every 2 s), wall seconds and exit status. ``on_sample`` hears the
    figures so far every 2 s (``status`` None: still running), so that a launch killed midway (a
    session's end) leaves its peak on record. The other real-model benches measure their
    processes with it too."""
    t = time.perf_counter()
    peak_tree = 0.0
    with open(log, "w") as f:
        p = subprocess.Popen(
            ["/usr/bin/time", "-f", "MAXRSS_KB %M", *cmd],
            env=env,
            cwd=cwd,
            stdout=f,
            stderr=subprocess.STDOUT,
        )
        try:
            while p.poll() is None:
                peak_tree = max(peak_tree, tree_pss_mb(p.pid))
                if on_sample is not None:
                    on_sample(
                        {
                            "peak_rss_gb": None,  # GNU time's, at the end
                            "peak_tree_gb": round(peak_tree / 1024, 2),
                            "wall_s": round(time.perf_counter() - t, 1),
                            "status": None,
                        }
                    )
                time.sleep(2)
        except BaseException:  # Ctrl-C: the command goes too, as under subprocess.run
            p.kill()
            p.wait()
            raise
    text = log.read_text()
    m = re.findall(r"MAXRSS_KB (\d+)", text)
    return {
        "peak_rss_gb": round(int(m[-1]) / 2**20, 2) if m else None,
        "peak_tree_gb": round(peak_tree / 1024, 2),
        "wall_s": round(time.perf_counter() - t, 1),
        "status": p.returncode,
        "tail": text[-600:] if p.returncode else "",
    }


def code_env(src_root: Path) -> dict[str, str]:
    """The environment that runs the packages of ``src_root`` (a worktree) instead of the installed ones."""
    paths = [str(src_root / "packages" / p / "src") for p in PACKAGES]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TRANSFORMERS_VERBOSITY": "error"}
