"""A tiny chat model built locally, for the embedded default, tests and CPU demos (no download).

1. Text: given; expert episodes on the envs' train splits (system prompt, observations, actions)
   in practice (``agentgym_train.rollout.experts``).
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
    texts: Sequence[str],
    *,
    vocab_size: int = 2048,
    arch: str = "qwen2",
    size: str = "small",
    seed: int = 0,
    source: dict[str, Any] | None = None,
) -> Path:
    """Build and save the tiny model, its tokenizer trained on ``texts``, under ``output``; returns
    the directory. ``source``: where the texts came from, kept in ``agentgym_tiny.json``
    (``rollout.experts.expert_texts`` makes them from envs' expert episodes)."""
    from transformers import GenerationConfig

    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    corpus = list(texts)
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
                **(source or {}),
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
