"""Where a model runs and in what precision: the device, the dtype (``auto``: bfloat16 where the
CPU or GPU computes in it natively), and seeding every random stream of a run."""

from __future__ import annotations

import random
import warnings

import numpy as np
import torch

from agentgym.errors import AgentGymError, lookup

#: The dtypes a model may be loaded (and trained) in, besides ``auto``.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def native_bf16(device: str | None = None) -> bool:
    """Whether ``device`` computes in bfloat16 natively: a CUDA GPU with bf16, or a CPU with AMX or
    AVX512-BF16 (measured for SmolLM2 in ``bench/speed/real_model_backends.py``)."""
    if (device or default_device()).startswith("cuda"):
        return torch.cuda.is_bf16_supported()
    checks = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")  # torch.cpu's own probes
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def resolve_dtype(
    name: str | None = "auto", device: str | None = None, *, trains: bool = False
) -> torch.dtype:
    """``auto`` (or None): bfloat16 where the device computes in it natively (:func:`native_bf16`),
    except for weights that train (``trains``: a full fine-tune keeps float32 weights, since a
    bfloat16 weight loses updates below 1/256 of itself, i.e. every update at RL learning
    rates); else float32. Otherwise one of ``DTYPES`` by name."""
    if name in (None, "auto"):
        return torch.bfloat16 if not trains and native_bf16(device) else torch.float32
    dtype = lookup(DTYPES, name, "dtype")
    if dtype is torch.bfloat16 and not native_bf16(device):
        warn_emulated_bf16("dtype bfloat16", "dtype auto or float32")
    return dtype


def resolve_autocast(setting: bool | str, device: str | None = None) -> bool:
    """Whether to compute under bfloat16 autocast: ``auto`` where the device computes in bfloat16
    natively (:func:`native_bf16`), else as given (``True`` where it is emulated warns)."""
    if not valid_autocast(setting):
        raise AgentGymError(f"autocast: {setting!r} is not true, false or auto")
    if setting == "auto":
        return native_bf16(device)
    if setting and not native_bf16(device):
        warn_emulated_bf16("autocast", "autocast auto or false")
    return setting


def valid_autocast(setting: object) -> bool:
    """An autocast setting: true, false or ``auto`` (not 0 or 1, which equal the booleans)."""
    return isinstance(setting, bool) or setting == "auto"


class EmulatedBF16Warning(UserWarning):
    """bfloat16 asked for where the device emulates it (a class of its own, for callers that
    compare dtypes on purpose to filter)."""


def warn_emulated_bf16(asked: str, instead: str) -> None:
    # A CPU without AMX or AVX512-BF16 emulates bfloat16: a 512x576 by 576x1536 matmul took 729 ms
    # against float32's 15 on a 2-core AVX2 AMD EPYC, so a bfloat16 run there crawls.
    warnings.warn(
        f"{asked} where the device emulates bfloat16 (a CPU without AMX or AVX512-BF16, a GPU "
        f"without bf16): tens of times slower than float32 there (use {instead})",
        EmulatedBF16Warning,
        stacklevel=3,
    )
