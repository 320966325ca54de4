"""SFT, DPO and AgentEvol on the nano model and the guess env's expert episodes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from agentgym_train.finetune.sft import dpo, encode, preference_pairs, read_data, sft
from agentgym_train.models.chat import ChatFormat
from agentgym_train.models.loading import load_tokenizer
from agentgym_train.policies import make_policy
from agentgym_train.rollout.evaluate import evaluate

from agentgym.trajectory import export_agentgym, write_episodes


@pytest.fixture(scope="module")
def demos():
    _, episodes = evaluate(["guess"], make_policy("scripted"), split="train", limit=12)
    assert all(e.success for e in episodes)
    return episodes


def test_conversation_tokens_are_the_template_and_mask_the_replies(demos, tiny_model):
    chat = ChatFormat(load_tokenizer(tiny_model))
    messages = [{"role": m.role, "content": m.content} for m in demos[0].messages]
    trace = chat.conversation(messages)
    rendered = chat.encode(chat.render(messages, False))
    # the same ids; the template may close the last turn with whitespace after the end-of-turn token
    assert rendered[: len(trace.ids)] == trace.ids and trace.ids[-1] == chat.eot_id
    assert chat.tokenizer.decode(rendered[len(trace.ids) :]).strip() == ""
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    sampled = [i for i, m in zip(trace.ids, trace.loss_mask, strict=True) if m]
    assert sampled == [t for r in replies for t in chat.encode(r) + [chat.eot_id]]


def test_read_data_takes_episodes_and_agentgym_format(demos, tmp_path):
    write_episodes(tmp_path / "e.jsonl", demos[:3])
    export_agentgym(demos[:2], tmp_path / "a.json")
    got = read_data([tmp_path / "e.jsonl", tmp_path / "a.json"])
    assert len(got) == 5

    def replies(ep):
        return [m.content for m in ep.messages if m.role == "assistant"]

    # AgentGym's format opens with the instruction as a user turn answered "OK"; the replies follow
    assert replies(got[3])[-len(replies(demos[0])) :] == replies(demos[0])


def test_sft_lowers_the_loss_and_saves_a_loadable_model(demos, tiny_model, tmp_path):
    summary = sft(tiny_model, demos, tmp_path / "sft", epochs=4, lr=3e-3, batch_size=4, seed=0)
    assert summary["last_epoch_loss"] < summary["first_epoch_loss"] * 0.8
    policy = make_policy("hf", model=str(tmp_path / "sft"))
    assert policy.chat.eot_id == ChatFormat(load_tokenizer(tiny_model)).eot_id
    assert len((tmp_path / "sft" / "sft_metrics.jsonl").read_text().splitlines()) == summary["steps"]


def test_sft_under_autocast_computes_in_bfloat16_over_float32_weights(demos, tiny_model, tmp_path):
    import torch

    dtypes = set()

    def record(module, _inputs, output):
        if isinstance(module, torch.nn.Linear) and module.weight.requires_grad:
            dtypes.add((module.weight.dtype, output.dtype))

    kw = dict(epochs=4, lr=3e-3, batch_size=4, seed=0)
    with torch.nn.modules.module.register_module_forward_hook(record):
        mixed = sft(tiny_model, demos, tmp_path / "bf16", autocast=True, **kw)
    assert dtypes == {(torch.float32, torch.bfloat16)}  # float32 weights, bfloat16 products
    assert mixed["autocast"] == "bfloat16"
    assert mixed["last_epoch_loss"] < mixed["first_epoch_loss"] * 0.8
    plain = sft(tiny_model, demos, tmp_path / "fp32", **kw)

    def first_loss(out):
        return json.loads((tmp_path / out / "sft_metrics.jsonl").read_text().splitlines()[0])["loss"]

    # the same batch: bfloat16 rounds the loss, a little
    assert plain["autocast"] is None and first_loss("fp32") != first_loss("bf16")
    assert first_loss("bf16") == pytest.approx(first_loss("fp32"), rel=0.02)
    saved = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert saved.get("torch_dtype", saved.get("dtype")) == "float32"


def test_dpo_pairs_and_loss(demos, tiny_model, tmp_path):
    good = demos[0]
    bad = good.model_copy(deep=True)
    bad.success, bad.termination = False, "max_turns"
    for m in bad.messages:
        if m.role == "assistant":
            m.content = "Thought: no idea.\nAction: guess 1"
    pairs = preference_pairs([good, bad, demos[1]])
    assert pairs == [(good, bad)]  # demos[1] has no failure to pair with
    summary = dpo(tiny_model, pairs * 4, tmp_path / "dpo", epochs=3, lr=3e-3, batch_size=4, beta=0.5)
    rows = [json.loads(line) for line in (tmp_path / "dpo" / "dpo_metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["loss"] < rows[0]["loss"] and rows[-1]["reward_accuracy"] == 1.0
    assert summary["pairs"] == 4


def test_encode_skips_episodes_without_replies(demos, tiny_model):
    chat = ChatFormat(load_tokenizer(tiny_model))
    empty = demos[0].model_copy(deep=True)
    empty.messages = empty.messages[:2]
    assert len(encode([empty, demos[0]], chat)) == 1


def test_sft_with_every_reply_past_max_len_says_max_len(demos, tiny_model, tmp_path):
    from agentgym.errors import AgentGymError

    with pytest.raises(AgentGymError, match="within max_len=8 tokens"):
        sft(tiny_model, demos, tmp_path / "m", epochs=1, max_len=8)


@pytest.mark.slow
def test_evolve_iterates_and_keeps_successes(demos, tiny_model, tmp_path):
    from agentgym_train.finetune.evolve import evolve

    summary = evolve(
        tiny_model,
        demos[:4],
        ["guess"],
        tmp_path / "ev",
        iterations=2,
        samples=2,
        explore_limit=3,
        val_n=1,
        max_new_tokens=16,
        sft_options={"epochs": 1, "lr": 1e-3, "batch_size": 4},
    )
    assert [i["iteration"] for i in summary["iterations"]] == [1, 2]
    assert (tmp_path / "ev" / "iter_2" / "config.json").is_file()
    assert all(0 <= i["val_success"] <= 1 for i in summary["iterations"])


def test_sft_cli_autocast_is_off_on_or_auto_and_a_bare_flag_is_on():
    import click
    from agentgym_train.cli.finetune import sft_command

    def autocast(*args: str) -> str:
        ctx = sft_command.make_context("sft", ["--model", "m", "--data", "d", "--output", "o", *args])
        return ctx.params["autocast"]

    assert [autocast(), autocast("--autocast"), autocast("--autocast", "auto")] == ["off", "on", "auto"]
    with pytest.raises(click.BadParameter, match="'maybe' is not one of"):
        autocast("--autocast", "maybe")


def test_sft_cli_bad_input_is_one_line(tiny_model, tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentgym",
            "sft",
            "--model",
            str(tiny_model),
            "--data",
            str(tmp_path / "nope.jsonl"),
            "--output",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "nope.jsonl" in r.stderr


@pytest.mark.parametrize("lora", [None, {"r": 4, "alpha": 8}], ids=["full", "lora"])
def test_a_checkpointed_model_trains_with_no_deprecation_warning(tiny_model, lora):
    """Activation checkpointing by the installed transformers' current API (its old names warn that
    they go in v6), under LoRA too: the layers recompute in backward and every trainable weight
    gets a gradient."""
    import warnings

    import torch
    from agentgym_train.models.loading import prepare_for_training
    from transformers import AutoModelForCausalLM

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        model = prepare_for_training(
            AutoModelForCausalLM.from_pretrained(tiny_model), lora=lora, checkpointing=True
        )
        ids = torch.randint(0, 100, (2, 12))
        model(input_ids=ids, labels=ids).loss.backward()
    base = model.get_base_model() if lora else model
    on = getattr(base, "is_activation_checkpointing", None)
    assert on if on is not None else base.is_gradient_checkpointing
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
