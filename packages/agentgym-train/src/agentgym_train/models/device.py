"""Where a model runs and in what precision: the device, the dtype (``auto``: bfloat16 where the
CPU or GPU computes in it natively), and seeding every random stream of a run."""

from __future__ import annotations

import random

import numpy as np
import torch

from agentgym.errors import lookup

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
    return lookup(DTYPES, name, "dtype")
