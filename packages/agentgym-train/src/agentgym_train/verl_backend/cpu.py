"""verl on machines without an accelerator: a ``cpu`` platform and two version-guarded patches.

verl 0.9 ships platforms for NVIDIA, AMD and Ascend only; with none present it falls back to
``cuda`` and ``nccl``. Everything here is registered through verl's own extension points
(``PlatformRegistry``, ``EngineRegistry``), selected with ``VERL_PLATFORM=cpu``, and is inert
otherwise: the platform never claims a machine by auto-detection. The two patches work around
verl code that assumes an accelerator; each names the code it works around, checks that code is
still what it patches (a newer verl fails with a clear message instead of running wrong), and is
written as the change we would propose upstream.
"""

from __future__ import annotations

import contextlib
import functools
import os
from types import SimpleNamespace
from typing import Any

from agentgym.errors import AgentGymError

#: The verl versions whose code the patches below were written against.
SUPPORTED_VERL = ("0.9.1",)


class VerlVersionError(AgentGymError, RuntimeError):
    """The installed verl is not one the backend's patches were checked against."""


def check_verl_version() -> str:
    """The installed verl version; raises with what to install when it is not supported."""
    try:
        import verl
    except ImportError as exc:
        raise VerlVersionError(
            "the verl backend needs verl: pip install 'agentgym-train[verl]' (verl==0.9.1)"
        ) from exc
    version = getattr(verl, "__version__", "unknown")
    if version not in SUPPORTED_VERL:
        raise VerlVersionError(
            f"verl {version} is installed; the agentgym verl backend supports {', '.join(SUPPORTED_VERL)} "
            "(its CPU patches and rollout adapter follow that code): pip install 'verl==0.9.1'"
        )
    return version


def on_cpu() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"


def _zero(*_: Any, **__: Any) -> int:
    return 0


def _nothing(*_: Any, **__: Any) -> None:
    return None


def _cpu_device_module() -> Any:
    """``torch.cpu`` with the calls verl makes on ``get_torch_device()`` that it lacks: memory
    statistics are 0 (nothing is reserved on an accelerator), seeding is torch's global one."""
    import torch

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return SimpleNamespace(
        is_available=lambda: True,
        current_device=lambda: "cpu",  # used as a device by verl/utils/fsdp_utils.py
        device_count=lambda: 1,
        set_device=_nothing,
        synchronize=_nothing,
        empty_cache=_nothing,
        ipc_collect=_nothing,
        current_stream=torch.cpu.current_stream,
        stream=torch.cpu.stream,
        Stream=torch.cpu.Stream,
        Event=torch.cpu.Event,
        get_rng_state=lambda *a: torch.get_rng_state(),
        set_rng_state=lambda state, *a: torch.set_rng_state(state),
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        mem_get_info=lambda *a: (total, total),
        memory_allocated=_zero,
        memory_reserved=_zero,
        max_memory_allocated=_zero,
        max_memory_reserved=_zero,
        reset_peak_memory_stats=_nothing,
        set_per_process_memory_fraction=_nothing,
        get_device_name=lambda *a: "cpu",
    )


class CPUPlatformMethods:
    """What verl's ``PlatformBase`` asks of a platform, for no accelerator: torch on the CPU,
    gloo for collectives. Ray still counts one logical ``GPU`` per worker (verl's resource pools
    are counted in GPUs), so Ray starts with ``num_gpus`` = workers; no device is behind it."""

    device_name = "cpu"
    vendor_name = "cpu"

    @functools.cached_property
    def device_module(self) -> Any:
        return _cpu_device_module()

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False  # only ever chosen explicitly, with VERL_PLATFORM=cpu

    def current_device(self) -> Any:
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        pass

    def synchronize(self, device_index: int | None = None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        import torch

        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str) -> Any:
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> None:
        return None


def register_platform() -> None:
    """Register the ``cpu`` platform with verl's ``PlatformRegistry`` (idempotent)."""
    from verl.plugin.platform.platform_base import PlatformBase
    from verl.plugin.platform.platform_manager import PlatformRegistry

    if PlatformRegistry.get("cpu") is None:
        PlatformRegistry.register(platform="cpu")(type("PlatformCPU", (CPUPlatformMethods, PlatformBase), {}))


def register_engines() -> None:
    """verl registers its FSDP engines for ``cuda`` and ``npu`` only
    (``verl/workers/engine/fsdp/transformer_impl.py``, ``@EngineRegistry.register(...,
    device=["cuda", "npu"])``); the same classes run on CPU tensors, so register them for ``cpu``."""
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl as impl

    engines = EngineRegistry._engines
    for model_type, cls in (
        ("language_model", impl.FSDPEngineWithLMHead),
        ("value_model", impl.FSDPEngineWithValueHead),
    ):
        for backend in ("fsdp", "fsdp2"):
            engines.setdefault(model_type, {}).setdefault(backend, {}).setdefault("cpu", cls)


def _check_source(obj: Any, needle: str, where: str) -> None:
    import inspect

    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError):
        source = ""
    if needle not in source:
        raise VerlVersionError(
            f"{where} no longer contains {needle!r}: the agentgym CPU patch for it does not apply to this "
            "verl version"
        )


def patch_process_group_backend() -> None:
    """Patch 1. ``verl.utils.distributed.initialize_global_process_group_ray`` builds the backend
    string ``f"cpu:gloo,{device}:{backend}"``, which on CPU is ``"cpu:gloo,cpu:gloo"``, a
    duplicate torch refuses. Upstream fix: ``"cpu:gloo"`` alone when the device is ``cpu``. Here:
    the function is wrapped to pass that backend when none is given (before verl's workers import
    it by name; the external-module hook runs first)."""
    import sys

    from verl.utils import distributed

    original = distributed.initialize_global_process_group_ray
    if getattr(original, "_agentgym_patched", False):
        return
    _check_source(original, 'f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"', "verl.utils.distributed")

    @functools.wraps(original)
    def initialize_global_process_group_ray(timeout_second: Any = None, backend: str | None = None) -> Any:
        return original(timeout_second=timeout_second, backend=backend or "cpu:gloo")

    initialize_global_process_group_ray._agentgym_patched = True  # type: ignore[attr-defined]
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray
    for name in ("verl.workers.engine_workers",):  # modules that import it by name, if already loaded
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "initialize_global_process_group_ray"):
            module.initialize_global_process_group_ray = initialize_global_process_group_ray


def patch_ref_offload_pinning() -> None:
    """Patch 2. The FSDP2 engine offloads forward-only models (the reference policy) with
    ``CPUOffloadPolicy(pin_memory=True)`` (``verl/workers/engine/fsdp/transformer_impl.py``);
    pinning needs CUDA and fails without it. Upstream fix: ``pin_memory=torch.cuda.is_available()``.
    Here: the module's ``CPUOffloadPolicy`` name is bound to a subclass that does exactly that."""
    import dataclasses

    import torch
    from verl.workers.engine.fsdp import transformer_impl as impl

    offload = impl.CPUOffloadPolicy  # FSDP's offload settings, not an agent policy
    if getattr(offload, "_agentgym_patched", False) or offload is None:
        return
    _check_source(impl.FSDPEngine, "CPUOffloadPolicy(pin_memory=True)", "verl FSDPEngine._build_fsdp_module")

    @dataclasses.dataclass
    class CPUOffloadPolicy(offload):  # type: ignore[misc, valid-type]
        _agentgym_patched = True

        def __post_init__(self) -> None:
            self.pin_memory = self.pin_memory and torch.cuda.is_available()

    impl.CPUOffloadPolicy = CPUOffloadPolicy


def install() -> None:
    """Everything a CPU run needs, in the process that calls it (verl imports the backend's
    external module in every Ray worker, which calls this when ``VERL_PLATFORM=cpu``)."""
    check_verl_version()
    register_platform()
    register_engines()
    patch_process_group_backend()
    patch_ref_offload_pinning()
