"""Models and tokenizers loaded from a directory, a ``.gguf`` file or a named model (``smollm2``),
and made ready to train: LoRA adapters, activation checkpointing.

Everything that trains or samples a Hugging Face model loads it here: the RL trainer, SFT, DPO and
the ``hf`` policy. Nothing here knows about envs, episodes or algorithms.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError
from agentgym_train.models.device import default_device, resolve_dtype
from agentgym_train.models.gguf import NAMED_MODELS, resolve_model


def model_dir(path: str | Path) -> Path:
    """The Hugging Face model directory for ``path``: the directory itself, or the cached import of
    a ``.gguf`` file or a named real model (``smollm2``); models are never downloaded from a hub."""
    p = resolve_model(path)
    if not (p / "config.json").is_file():
        raise AgentGymError(
            f"model {p}: not a Hugging Face model directory (no config.json) nor a .gguf file; models "
            "are never downloaded from a hub, pass a local directory, a .gguf file or 'smollm2'"
        )
    return p


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer of a model directory.

    ``AutoTokenizer`` picks the class from the model's config; a tokenizer trained with the
    ``tokenizers`` library next to a qwen2 config then loads as ``Qwen2Tokenizer`` and yields no
    ids, so an empty encoding falls back to the generic fast tokenizer over ``tokenizer.json``.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if not Path(path).exists() and str(path) not in NAMED_MODELS:
        raise AgentGymError(
            f"model path {str(path)!r} does not exist (models are never downloaded; pass a local "
            "directory, a .gguf file or 'smollm2')"
        )
    path = str(model_dir(path))
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # noqa: BLE001
        if not (Path(path) / "tokenizer.json").exists():
            raise AgentGymError(f"cannot load a tokenizer from {path}: {exc}") from exc
        tok = None
    if tok is None or not tok("hello world", add_special_tokens=False)["input_ids"]:
        tok = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    return tok


def load_model(
    path: str | Path, *, dtype: str | None = "auto", device: str | None = None, trains: bool = False
) -> Any:
    """The causal LM of a model directory (or ``.gguf`` file, see :func:`model_dir`) on ``device``
    (default: :func:`default_device`), in ``dtype`` (see :func:`resolve_dtype`)."""
    from transformers import AutoModelForCausalLM

    device = device or default_device()
    try:
        model = AutoModelForCausalLM.from_pretrained(
            model_dir(path), dtype=resolve_dtype(dtype, device, trains=trains), local_files_only=True
        )
    except OSError as exc:
        raise AgentGymError(f"cannot load a model from {path}: {exc}") from exc
    return model.to(device)


def prepare_for_training(
    model: Any, *, lora: dict[str, Any] | None = None, checkpointing: bool = False
) -> Any:
    """``model`` ready to train: LoRA adapters on every linear layer (``lora``: ``r`` and ``alpha``;
    peft keeps the adapters in float32 over a bfloat16 base), and gradient checkpointing (each
    layer's activations recomputed in backward instead of kept: memory for about a third more
    compute), in training mode."""
    if checkpointing:
        _checkpoint_activations(model)
        model.config.use_cache = False
    if lora:
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(
            r=lora["r"], lora_alpha=lora["alpha"], target_modules="all-linear", task_type="CAUSAL_LM"
        )
        with warnings.catch_warnings():
            # peft reads the deprecated ``is_gradient_checkpointing`` alias of transformers >= 5.25
            # (its own code, not ours); the warning tells our users nothing they can act on.
            warnings.filterwarnings(
                "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
            )
            model = get_peft_model(model, config)
        if checkpointing:
            model.enable_input_require_grads()  # checkpointed layers need an input that requires grad
    return model.train()


def _checkpoint_activations(model: Any) -> None:
    """Activation (gradient) checkpointing by the installed transformers' current name for it:
    ``activation_checkpointing_enable`` from 5.25, where the old name warns it will go."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


@dataclass(frozen=True)
class TrainingModel:
    """How the model that trains is loaded (sft, dpo, evolve and the RL learner alike): ``dtype``
    (``auto``: float32 weights for a full fine-tune, a bfloat16 base under LoRA where the hardware
    has it; see :func:`resolve_dtype`), LoRA adapters of rank ``lora_r`` (0: every weight trains),
    and gradient checkpointing."""

    dtype: str = "auto"
    lora_r: int = 0
    lora_alpha: int = 32
    gradient_checkpointing: bool = True

    def load(self, path: str | Path, device: str | None = None) -> Any:
        """The model of ``path`` on ``device``, ready to train (:func:`prepare_for_training`)."""
        model = load_model(path, dtype=self.dtype, device=device, trains=not self.lora_r)
        lora = {"r": self.lora_r, "alpha": self.lora_alpha} if self.lora_r else None
        return prepare_for_training(model, lora=lora, checkpointing=self.gradient_checkpointing)
