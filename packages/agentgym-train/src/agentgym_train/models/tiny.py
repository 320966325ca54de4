"""A tiny chat model built locally, for the embedded default, tests and CPU demos (no download).

1. Text: expert episodes on the envs' train splits (system prompt, observations, actions).
2. Tokenizer: byte-level BPE trained with the ``tokenizers`` library on that text, with ChatML
   role tokens and a ChatML chat template (append-only, so rollouts can be token-in/token-out).
3. Model: a small Qwen2 (or Llama) from a config, randomly initialised with a fixed seed.
Both are saved as one Hugging Face directory that the ``hf`` and ``vllm`` policies load.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentgym.errors import lookup

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = [PAD, IM_START, IM_END]

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

#: Sizes by name: ``small`` is the default (~3.5M parameters with a 2k vocabulary). Head sizes are
#: at least 32: vLLM's CPU attention supports no smaller ones.
SIZES: dict[str, dict[str, int]] = {
    "nano": {
        "hidden_size": 64,
        "intermediate_size": 192,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
    },
    "micro": {
        "hidden_size": 128,
        "intermediate_size": 384,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    "small": {
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    "base": {
        "hidden_size": 512,
        "intermediate_size": 1536,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
    },
}


def expert_texts(envs: Sequence[str], tasks_per_env: int = 100, max_turns: int | None = None) -> list[str]:
    """Texts of expert episodes on the first ``tasks_per_env`` ids of each env's train split."""
    from agentgym.plugins import get_env_spec
    from agentgym_train.envs import LocalEnvs
    from agentgym_train.policies.scripted import ScriptedPolicy
    from agentgym_train.rollout import RolloutEngine, Task

    texts: list[str] = []
    for name in envs:
        spec = get_env_spec(name)
        split = spec.splits.get("train") or next(iter(spec.splits.values()))
        ids = list(split.task_ids[:tasks_per_env])
        engine = RolloutEngine(
            ScriptedPolicy(), {name: LocalEnvs(spec)}, max_turns=max_turns or max(spec.default_max_turns, 50)
        )
        episodes = engine.run([Task(name, t, split="train") for t in ids])
        seen_system: set[str] = set()
        for ep in episodes:
            for m in ep.messages:
                if m.role == "system":
                    if m.content in seen_system:
                        continue
                    seen_system.add(m.content)
                texts.append(m.content)
    return texts


# Qwen2's pre-tokenisation. transformers (and vLLM through it) load any tokenizer next to a qwen2
# config.json as Qwen2Tokenizer, which re-applies this normaliser and split over our vocabulary:
# training with the same ones makes every loader give the same ids.
QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2048) -> Any:
    """A byte-level BPE tokenizer with ChatML special tokens, as a transformers fast tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=PAD, clean_up_tokenization_spaces=False
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def build_model(
    tokenizer: Any, *, arch: str = "qwen2", size: str = "small", max_positions: int = 8192, seed: int = 0
) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    dims = lookup(SIZES, size, "tiny size")
    model_cls, config_cls = lookup(
        {"qwen2": (Qwen2ForCausalLM, Qwen2Config), "llama": (LlamaForCausalLM, LlamaConfig)},
        arch,
        "tiny architecture",
    )
    common: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "max_position_embeddings": max_positions,
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": tokenizer.convert_tokens_to_ids(IM_END),
        "pad_token_id": tokenizer.convert_tokens_to_ids(PAD),
        **dims,
    }
    torch.manual_seed(seed)
    return model_cls(config_cls(**common))


def build_tiny(
    output: str | Path,
    *,
    envs: Sequence[str] = ("babyai",),
    tasks_per_env: int = 100,
    vocab_size: int = 2048,
    arch: str = "qwen2",
    size: str = "small",
    seed: int = 0,
    texts: Sequence[str] | None = None,
) -> Path:
    """Build and save the tiny model and its tokenizer under ``output``; returns the directory."""
    from transformers import GenerationConfig

    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    corpus = list(texts) if texts is not None else expert_texts(envs, tasks_per_env)
    tokenizer = train_tokenizer(corpus, vocab_size)
    model = build_model(tokenizer, arch=arch, size=size, seed=seed)
    model.generation_config = GenerationConfig(
        eos_token_id=model.config.eos_token_id, pad_token_id=model.config.pad_token_id, do_sample=True
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "agentgym_tiny.json").write_text(
        json.dumps(
            {
                "envs": list(envs),
                "tasks_per_env": tasks_per_env,
                "texts": len(corpus),
                "vocab_size": len(tokenizer),
                "arch": arch,
                "size": size,
                "seed": seed,
                "parameters": sum(p.numel() for p in model.parameters()),
            },
            indent=2,
        )
    )
    return out


def model_for_run(cfg: Any, run_dir: Path, log: Any = print) -> Path:
    """A run's model: the configured one, or the tiny model built (once) inside the run."""
    from agentgym_train.modeling import model_dir

    if cfg.model:
        return model_dir(cfg.model)
    path = Path(run_dir) / "tiny"
    if not (path / "config.json").is_file():
        log(f"building the tiny model in {path}")
        build_tiny(path, envs=cfg.envs, tasks_per_env=cfg.tiny_tasks, size=cfg.tiny_size, seed=cfg.seed)
    return path
