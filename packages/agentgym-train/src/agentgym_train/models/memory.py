"""Process memory on CPU: glibc's malloc settings that training runs under, handing freed memory
back to the system, and the peak resident memory every command reports.

Linux with glibc for the malloc settings (elsewhere they do nothing); the peak everywhere.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch


def _glibc() -> Any | None:
    """The C library when it is glibc on Linux (its allocator's knobs), else None."""
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None  # not musl


def one_malloc_arena() -> bool:
    """Have glibc's malloc serve every thread from one heap (``M_ARENA_MAX`` 1) from now on, as
    training does: the trainer, the envs' server thread and a vLLM engine then reuse each other's
    freed blocks instead of each faulting in pages of its own arena. Beside the recipe's engine
    the update ran 1.3x faster (``bench/results/rl_memory.md``). Linux with glibc only; returns whether
    it applied."""
    libc = _glibc()
    return bool(libc.mallopt(-8, 1)) if libc is not None else False  # -8: M_ARENA_MAX


def mmap_threshold(size: int) -> bool:
    """Have glibc's malloc serve blocks of ``size`` bytes and more by ``mmap`` (given back to the
    system when freed) and smaller ones from its heap (kept); this also stops glibc raising the
    threshold by itself. Linux with glibc only; returns whether it applied."""
    libc = _glibc()
    return bool(libc.mallopt(-3, size)) if libc is not None else False  # -3: M_MMAP_THRESHOLD


KERNEL_CACHE = 32
"""oneDNN kernels kept per process (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``; oneDNN's default 1,024)."""


def bound_kernel_cache(capacity: int = KERNEL_CACHE) -> bool:
    """Have oneDNN (bfloat16 matmuls on CPU) keep at most ``capacity`` compiled kernels, the least
    recently used going first, unless ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` is set. It builds one per
    new matrix shape, and a step's micro-batches and vLLM's batches come in many: beside the width
    rounding of :data:`~agentgym_train.models.logprobs.SHAPE_MULTIPLE` the BabyAI recipe's RL process
    still peaked 0.5 GB higher by step 8 with the default (5.3 vs 4.8 GB, the same losses and step
    times). oneDNN reads the variable when it first builds a kernel: call this before any bfloat16
    matmul of the process; returns whether it applied (False when the variable was set already)."""
    if "ONEDNN_PRIMITIVE_CACHE_CAPACITY" in os.environ:
        return False
    os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(capacity)
    return True


def release_memory() -> None:
    """Collect garbage, then have glibc give the heap's free pages back to the system (a model
    freed leaves them resident otherwise, and the next phase's peak stacks on top)."""
    import gc

    gc.collect()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


@contextlib.contextmanager
def frees_to_system() -> Iterator[None]:
    """Within: every block of 1 MB or more goes back to the system when freed. glibc otherwise
    raises its threshold with every large block freed, after which activations and gradients come
    from the heap and stay there: a CPU fine-tune of SmolLM2 peaked 1 GB higher (3.75 vs 2.77 GB).
    After: 32 MB (glibc's ceiling), so sampling's many mid-sized tensors are not mapped afresh."""
    mmap_threshold(1 << 20)
    try:
        yield
    finally:
        mmap_threshold(32 << 20)


def peak_rss_gb() -> float:
    """This process's peak resident memory in GB: the kernel's high-water mark of its own address
    space (``VmHWM``). Not ``getrusage``'s ``ru_maxrss``: Linux carries that over ``exec``, so a
    command started from a large process (a pytest worker, a notebook) would report its parent's
    peak as its own."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 2**20, 2)  # kB
    except OSError:
        pass
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, kB elsewhere
    return round(rss / (2**30 if sys.platform == "darwin" else 2**20), 2)


def peak_memory() -> dict[str, float]:
    """This process's peak resident memory so far (``peak_rss_gb``, see :func:`peak_rss_gb`), and
    the peak CUDA allocation when a GPU is in use (``peak_cuda_gb``)."""
    out = {"peak_rss_gb": peak_rss_gb()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["peak_cuda_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return out
