"""Memory and time of a verl run, for the figures every training command reports.

verl's trainer is a process tree (its entry point, a local Ray cluster's raylet and workers, the
rollout server): no process's own peak is the run's. :class:`TreeMemory` samples the tree's
proportional set size (PSS: each page shared between the processes counted once) and keeps the
highest; verl's own step metrics add the GPU's peak allocation and the steps' times.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any


class TreeMemory:
    """The peak summed PSS of process ``pid`` and its descendants, sampled every ``every`` seconds
    on a thread from ``start()`` until ``stop()`` (a context manager does both)."""

    def __init__(self, pid: int, every: float = 1.0) -> None:
        self.pid, self.every, self.peak_gb = pid, every, 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="agentgym-tree-memory", daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        import psutil

        while not self._done.is_set():
            try:
                root = psutil.Process(self.pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:  # the run has ended
                return
            total = 0
            for proc in procs:
                try:
                    total += proc.memory_full_info().pss
                except psutil.Error:  # ended, or not ours to read, between the listing and now
                    continue
            self.peak_gb = max(self.peak_gb, total / 2**30)
            self._done.wait(self.every)


def step_figures(metrics: Path) -> dict[str, Any]:
    """From verl's step metrics (its ``file`` logger's JSON Lines): the steps logged, their summed
    time (``timing_s/step``) and the highest GPU allocation any worker reported."""
    rows = []
    if metrics.is_file():
        rows = [json.loads(line).get("data", {}) for line in metrics.read_text().splitlines() if line.strip()]
    gpu = [v for r in rows for k, v in r.items() if k.endswith("perf/max_memory_allocated_gb")]
    return {
        "steps": sum("timing_s/step" in r for r in rows),  # not validation-only rows
        "step_time_s": round(sum(r.get("timing_s/step", 0.0) for r in rows), 1),
        "peak_gpu_gb": round(max(gpu), 2) if gpu and max(gpu) > 0 else None,
    }
