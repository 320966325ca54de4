"""How many instances of an env to hold at once, from what one costs and what the machine has.

Everything that makes env instances (the rollout's in-process envs, the server's sessions) holds at
most :func:`instance_bound` of them per env and queues (or, on the server, refuses with 503) what
goes beyond. Cheap pure-Python envs get a bound far above any batch; an env with a process of its
own (a JVM, a browser) gets a few per core.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from agentgym.spec import InstanceCost

#: Share of the memory available when a bound is computed that instances of one env may take.
MEMORY_FRACTION = 0.5
#: Instances per core their CPU share allows: they mostly wait (for the policy, for HTTP).
CPU_OVERSUBSCRIPTION = 4


def available_memory_mb() -> float:
    """Memory the machine can give now without swapping (``MemAvailable``), in MB."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (ValueError, OSError):
        return 4096.0


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Bound:
    """At most ``limit`` instances of one env at once, and why."""

    limit: int
    by_memory: int
    by_cpu: int | None  # None: the env takes no CPU outside the caller's thread
    cores: int = 1
    override: bool = False

    def explain(self) -> str:
        if self.override:
            return f"at most {self.limit} instance(s) (set by --max-instances / max_instances)"
        reasons = [f"memory allows {self.by_memory}"]
        if self.by_cpu is not None:
            reasons.append(f"{self.cores} core(s) allow {self.by_cpu}")
        return f"at most {self.limit} instance(s) ({', '.join(reasons)})"


def instance_bound(
    cost: InstanceCost,
    *,
    override: int | None = None,
    memory_mb: float | None = None,
    ncores: int | None = None,
) -> Bound:
    """The most instances of an env with ``cost`` to hold at once on this machine (at least 1):
    ``MEMORY_FRACTION`` of the available memory over one instance's, and, for envs that use CPU
    of their own, ``CPU_OVERSUBSCRIPTION`` per core over one instance's share. ``override`` wins."""
    memory = available_memory_mb() if memory_mb is None else memory_mb
    ncores = ncores or cores()
    by_memory = max(1, int(memory * MEMORY_FRACTION // cost.memory_mb))
    by_cpu = None
    if cost.cpu > 0:
        by_cpu = max(1, math.floor(CPU_OVERSUBSCRIPTION * ncores / cost.cpu))
    if override is not None:
        if override < 1:
            raise ValueError(f"max instances must be >= 1, got {override}")
        return Bound(override, by_memory, by_cpu, ncores, override=True)
    return Bound(min(by_memory, by_cpu or by_memory), by_memory, by_cpu, ncores)
