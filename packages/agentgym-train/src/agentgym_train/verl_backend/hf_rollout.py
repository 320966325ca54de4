"""``rollout.name=agentgym_hf``: a verl rollout backend served by our ``hf`` policy (transformers).

verl's async rollout registry knows vLLM, SGLang and TensorRT-LLM, all GPU servers. This backend
makes verl's agent-loop trainer run where none of them does (a CPU machine, a GPU machine without
vLLM), with verl's own extension points: a Ray server actor answering ``generate(prompt_ids,
sampling_params, request_id, ...) -> TokenOutput`` (requests that arrive together are generated
as one batch), a :class:`RolloutReplica` that launches it (``RolloutReplicaRegistry``), and a
:class:`BaseRollout` adapter in the trainer's workers that hands it the new weights after every
update (``update_weights``, verl's ``naive`` checkpoint engine).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import Any

from agentgym_train.models.device import DTYPES
from agentgym_train.policies.base import Request, Sampling
from agentgym_train.policies.hf import HFPolicy

NAME = "agentgym_hf"


def server_name(replica_rank: int) -> str:
    return f"{NAME}_server_{replica_rank}"


class HFRolloutServer:
    """One replica's generation server (a Ray actor): the model loaded from verl's model path,
    weights replaced by :meth:`load_weights`, concurrent requests batched."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int = 0, device: str | None = None):
        self.replica_rank = replica_rank
        dtype = str(getattr(config, "dtype", "float32") or "float32")
        # model_config: a DictConfig or verl's HFModelConfig, both with get()
        path = model_config.get("local_path") or model_config.get("path")
        self.policy = HFPolicy(
            path,
            device=device,
            dtype=dtype if dtype in DTYPES else None,
            kv_reuse=False,  # requests of one episode come as separate calls: nothing to keep
        )
        self.global_steps = 0
        self._pending: list[tuple[list[int], dict[str, Any], asyncio.Future]] = []
        self._lock = asyncio.Lock()
        self._draining = False

    # -- generation ---------------------------------------------------------------------------
    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        **_: Any,
    ) -> Any:
        if image_data is not None or video_data is not None:
            raise ValueError(f"rollout {NAME!r} serves text models only")
        future = asyncio.get_running_loop().create_future()
        self._pending.append((list(prompt_ids), dict(sampling_params), future))
        if not self._draining:
            self._draining = True
            asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        """Generate everything pending, one batched call per distinct sampling setting."""
        try:
            while self._pending:
                await asyncio.sleep(0.005)  # let the requests of one agent-loop turn arrive together
                batch, self._pending = self._pending, []
                try:
                    groups: dict[tuple, list[tuple[list[int], dict[str, Any], asyncio.Future]]] = {}
                    for item in batch:
                        groups.setdefault(_sampling_key(item[1]), []).append(item)
                    for items in groups.values():
                        await self._generate_group(items)
                except Exception as exc:  # noqa: BLE001 - no request of the batch is left waiting
                    for *_, future in batch:
                        if not future.done():
                            future.set_exception(exc)
        finally:
            self._draining = False

    async def _generate_group(self, items: list[tuple[list[int], dict[str, Any], asyncio.Future]]) -> None:
        from verl.workers.rollout.replica import TokenOutput

        sampling = _sampling(items[0][1])
        requests = [Request(messages=[], prompt_ids=p, seed=s.get("seed")) for p, s, _ in items]
        try:
            async with self._lock:
                gens = await asyncio.to_thread(self.policy.generate, requests, sampling)
        except Exception as exc:  # noqa: BLE001 - every waiting request gets the failure
            for *_, future in items:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, params, future), g in zip(items, gens, strict=True):
            if future.done():
                continue
            future.set_result(
                TokenOutput(
                    token_ids=list(g.token_ids or []),
                    log_probs=list(g.logprobs) if params.get("logprobs") and g.logprobs is not None else None,
                    stop_reason="completed",
                    extra_fields={"global_steps": self.global_steps},
                )
            )

    # -- weights ------------------------------------------------------------------------------
    async def load_weights(self, state: dict[str, Any], global_steps: int | None = None) -> int:
        """Copy the trainer's weights into the model (names as the trainer's state dict); returns
        how many tensors were loaded."""
        import torch

        model = self.policy.model
        own = model.state_dict()
        unknown = sorted(set(state) - set(own))
        if unknown:
            raise KeyError(f"weights the rollout model does not have: {unknown[:5]}")
        async with self._lock:
            with torch.no_grad():
                for name, tensor in state.items():
                    own[name].copy_(tensor.to(own[name].device, own[name].dtype))
        if global_steps is not None:
            self.global_steps = int(global_steps)
        return len(state)

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = int(global_steps)

    def ready(self) -> bool:
        return True

    # -- verl's control calls: nothing to release or resume for a transformers model ---------
    async def wake_up(self, *_: Any, **__: Any) -> None: ...
    async def sleep(self, *_: Any, **__: Any) -> None: ...
    async def clear_kv_cache(self, *_: Any, **__: Any) -> None: ...
    async def release_kv_cache(self, *_: Any, **__: Any) -> None: ...
    async def resume_kv_cache(self, *_: Any, **__: Any) -> None: ...
    async def abort_all_requests(self, *_: Any, **__: Any) -> dict[str, Any]:
        return {}

    async def resume_generation(self, *_: Any, **__: Any) -> None: ...
    async def start_profile(self, *_: Any, **__: Any) -> None: ...
    async def stop_profile(self, *_: Any, **__: Any) -> None: ...
    async def wait_for_requests_to_drain(self, *_: Any, **__: Any) -> None: ...


def _sampling_key(params: dict[str, Any]) -> tuple:
    return (
        float(params.get("temperature", 1.0)),
        float(params.get("top_p", 1.0)),
        int(params.get("max_tokens", params.get("max_new_tokens", 256))),
    )


def _sampling(params: dict[str, Any]) -> Any:
    temperature, top_p, max_tokens = _sampling_key(params)
    return Sampling(temperature=temperature, top_p=top_p, max_new_tokens=max_tokens)


def replica_class() -> type:
    """The :class:`RolloutReplica` that launches one :class:`HFRolloutServer` per replica."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    from verl.workers.rollout.replica import RolloutReplica

    class HFRolloutReplica(RolloutReplica):
        async def launch_servers(self) -> None:
            device = "cpu"
            env_vars: dict[str, str] = {}
            options: dict[str, Any] = {}
            if self.workers:
                # on its replica's first worker's node (and GPU), as verl's vLLM replica places its server
                node, gpu = await self.workers[0].__ray_call__.remote(
                    lambda w: (
                        ray.get_runtime_context().get_node_id(),
                        ray.get_runtime_context().get_accelerator_ids().get("GPU", []),
                    )
                )
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
            if self.workers and os.environ.get("VERL_PLATFORM", "").lower() != "cpu":
                if gpu:
                    env_vars = {
                        "CUDA_VISIBLE_DEVICES": ",".join(gpu),
                        "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1",
                    }
                    device = "cuda"
            server = (
                ray.remote(HFRolloutServer)
                .options(
                    name=server_name(self.replica_rank),
                    num_cpus=0,
                    max_concurrency=self.max_concurrency,
                    runtime_env={"env_vars": env_vars} if env_vars else None,
                    **options,
                )
                .remote(self.config, self.model_config, self.replica_rank, device)
            )
            await server.ready.remote()
            self.servers = [server]
            self._server_handle = server
            self._server_address = server_name(self.replica_rank)  # token-in/token-out only: no HTTP

    return HFRolloutReplica


def adapter_class() -> type:
    """The :class:`BaseRollout` in the trainer's workers: forwards each weight update."""
    import ray
    from verl.workers.rollout.base import BaseRollout

    class HFServerAdapter(BaseRollout):
        def __init__(
            self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1, **_: Any
        ):
            super().__init__(config, model_config, device_mesh)
            world = (
                self.config.tensor_model_parallel_size
                * self.config.data_parallel_size
                * self.config.pipeline_model_parallel_size
            )
            rank = int(os.environ.get("RANK", 0))
            self.replica_rank = rank // world if replica_rank == -1 else replica_rank
            self.sends = rank % world == 0  # one rank per replica talks to its server
            self._server: Any = None

        async def resume(self, tags: list[str]) -> None:
            pass

        async def release(self) -> None:
            pass

        async def update_weights(
            self, weights: Iterable[tuple[str, Any]], wire_format: str = "named_tensors", **kwargs: Any
        ) -> None:
            if wire_format != "named_tensors":
                raise ValueError(f"rollout {NAME!r} takes full weights (wire_format='named_tensors')")
            if kwargs.get("peft_config") is not None:
                raise ValueError(
                    f"rollout {NAME!r} takes merged weights: set actor_rollout_ref.model.lora.merge=True"
                )
            # every rank walks the generator (gathering sharded weights is a collective); only the
            # sending rank keeps a copy, in the weights' own dtype
            if not self.sends:
                for _ in weights:
                    pass
                return
            state = {name: t.detach().to("cpu", copy=True) for name, t in weights}
            if self._server is None:
                self._server = ray.get_actor(server_name(self.replica_rank))
            await self._server.load_weights.remote(state, kwargs.get("global_steps"))

    return HFServerAdapter


def register() -> None:
    """Make ``rollout.name=agentgym_hf`` known to verl (idempotent)."""
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    base._ROLLOUT_REGISTRY[(NAME, "async")] = f"{__name__}.HFServerAdapter"
    RolloutReplicaRegistry.register(NAME, replica_class)


def __getattr__(name: str) -> Any:
    # verl resolves the adapter by dotted path (``get_rollout_class``): built on first use
    if name == "HFServerAdapter":
        cls = adapter_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
