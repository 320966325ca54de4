"""The tiny model built locally, sampled with the hf policy, evaluated end to end on CPU."""

from __future__ import annotations

import json
import math

import pytest
from agentgym_train.models.loading import load_tokenizer
from agentgym_train.policies.base import Request, Sampling
from agentgym_train.policies.hf import HFPolicy

from agentgym.server.background import serve_in_thread
from agentgym.trajectory import read_episodes

# The equivalences below (our sampling loop vs transformers' generate, a carried KV cache vs the
# whole context, log-probs vs a fresh forward) are exact in float32; ``auto`` would pick bfloat16
# on a CPU that has it, where two exact computations round differently.
F32 = {"dtype": "float32"}


def test_tiny_directory_loads_with_auto_classes(tiny_model):
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = load_tokenizer(tiny_model)
    raw = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(tiny_model)  # a Qwen2Tokenizer: same ids as trained
    for text in [
        "go to red ball 1",
        "Thought: I'll  guess 50!\nAction: guess 50",
        "<|im_start|>user\nHi<|im_end|>\n",
    ]:
        ids = raw.encode(text, add_special_tokens=False).ids
        assert ids and tok(text, add_special_tokens=False)["input_ids"] == ids
        assert auto(text, add_special_tokens=False)["input_ids"] == ids
    assert tok.convert_tokens_to_ids("<|im_end|>") == tok.eos_token_id
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert model.config.model_type == "qwen2" and model.config.vocab_size == len(tok)
    meta = json.loads((tiny_model / "agentgym_tiny.json").read_text())
    assert meta["parameters"] == sum(p.numel() for p in model.parameters())


def test_hf_policy_returns_sampled_ids_and_their_logprobs(tiny_model):
    import torch

    policy = HFPolicy(str(tiny_model), **F32)
    messages = [
        {"role": "system", "content": "Play."},
        {"role": "user", "content": "I am thinking of a number."},
    ]
    prompts = [
        policy.chat.start(messages),
        policy.chat.start(messages[:1] + [{"role": "user", "content": "Higher."}]),
    ]
    gens = policy.generate(
        [Request(messages, prompt_ids=p) for p in prompts], Sampling(max_new_tokens=12, seed=3)
    )
    assert len(gens) == 2
    for prompt, g in zip(prompts, gens, strict=True):
        assert 1 <= len(g.token_ids) <= 12 and len(g.logprobs) == len(g.token_ids)
        assert g.stopped == (g.token_ids[-1] in policy.chat.stop_ids)
        assert policy.chat.eot_id not in g.token_ids[:-1]
        # The returned logprobs are the model's own for those tokens (a forward pass agrees),
        # although the two prompts had different lengths (left padding).
        with torch.no_grad():
            logits = policy.model(torch.tensor([prompt + g.token_ids])).logits[0].float()
        lp = torch.log_softmax(logits[len(prompt) - 1 : -1], -1).gather(
            -1, torch.tensor(g.token_ids)[:, None]
        )[:, 0]
        assert lp.tolist() == pytest.approx(g.logprobs, abs=1e-4)
        assert all(math.isfinite(x) and x <= 0 for x in g.logprobs)
    again = policy.generate(
        [Request(messages, prompt_ids=p) for p in prompts], Sampling(max_new_tokens=12, seed=3)
    )
    assert [g.token_ids for g in again] == [g.token_ids for g in gens]  # same seed, same samples
    greedy = policy.generate(
        [Request(messages, prompt_ids=prompts[0])], Sampling(temperature=0, max_new_tokens=5)
    )
    assert (
        greedy[0].token_ids
        == policy.generate([Request(messages)], Sampling(temperature=0, max_new_tokens=5))[0].token_ids
    )


def test_right_padded_sampling_loop_equals_transformers_generate(tiny_model):
    """Our sampling loop (right-padded prefill without a mask) against ``generate`` on
    left-padded prompts: the same greedy tokens and log-probabilities for prompts of very
    different lengths, and sampled tokens whose log-probabilities a forward pass confirms."""
    import torch

    policy = HFPolicy(str(tiny_model), **F32)
    assert policy.fast  # a qwen2 model takes the fast path
    base = [{"role": "system", "content": "Play the game."}]
    prompts = [
        policy.chat.start(base + [{"role": "user", "content": "go to the red ball " * k}]) for k in (1, 9, 30)
    ]
    reqs = [Request(base, prompt_ids=p) for p in prompts]
    greedy = Sampling(temperature=0, max_new_tokens=10)
    fast = policy.generate(reqs, greedy)
    policy.fast = False
    slow = policy.generate(reqs, greedy)
    policy.fast = True
    assert [g.token_ids for g in fast] == [g.token_ids for g in slow]
    for f, s in zip(fast, slow, strict=True):
        assert f.logprobs == pytest.approx(s.logprobs, abs=1e-4) and f.stopped == s.stopped
    sampled = policy.generate(reqs, Sampling(temperature=1.3, top_p=0.9, max_new_tokens=10, seed=5))
    for prompt, g in zip(prompts, sampled, strict=True):
        with torch.no_grad():
            logits = policy.model(torch.tensor([prompt + g.token_ids])).logits[0].float()
        lp = torch.log_softmax(logits[len(prompt) - 1 : -1], -1).gather(
            -1, torch.tensor(g.token_ids)[:, None]
        )
        assert lp[:, 0].tolist() == pytest.approx(g.logprobs, abs=1e-4)


def test_kv_cache_carried_across_turns_equals_running_the_whole_context(tiny_model):
    """A second turn that reuses each episode's keys and values from the first gives the tokens and
    log-probabilities of running its whole context again; a key whose cached tokens are not a
    prefix of its new prompt is recomputed, and only the last call's episodes are kept."""
    import torch

    policy = HFPolicy(str(tiny_model), **F32)
    fresh = HFPolicy(str(tiny_model), kv_reuse=False, **F32)
    base = [{"role": "system", "content": "Play the game."}]
    first = [
        policy.chat.start(base + [{"role": "user", "content": "go to the red ball " * k}]) for k in (1, 6, 20)
    ]
    greedy = Sampling(temperature=0, max_new_tokens=8)
    turn1 = policy.generate(
        [Request(base, prompt_ids=p, cache_key=k) for k, p in zip("abc", first, strict=True)], greedy
    )
    assert set(policy._kept) == {"a", "b", "c"}
    obs = policy.chat.encode("You see a wall. " * 3)
    second = {
        "a": first[0] + turn1[0].token_ids + obs,  # continues: reuses all but its last reply token
        "b": first[1] + turn1[1].token_ids + obs * 4,
        "c": first[2][:5] + obs,  # not a continuation of what "c" cached
        "d": first[0] + obs,  # a new episode
    }
    assert policy._reusable("a", second["a"])[0] == len(first[0]) + len(turn1[0].token_ids) - 1
    assert policy._reusable("c", second["c"])[0] == 0
    reqs = [Request(base, prompt_ids=p, cache_key=k) for k, p in second.items()]
    reused = policy.generate(reqs, greedy)
    whole = fresh.generate(reqs, greedy)
    assert [g.token_ids for g in reused] == [g.token_ids for g in whole]
    for r, w in zip(reused, whole, strict=True):
        assert r.logprobs == pytest.approx(w.logprobs, abs=1e-4)
    assert set(policy._kept) == set(second) and not fresh._kept
    # sampled tokens after reuse: their log-probabilities are the model's for the whole context
    third = [second[k] + g.token_ids + obs for k, g in zip(second, reused, strict=True)]
    sampled = policy.generate(
        [Request(base, prompt_ids=p, cache_key=k) for k, p in zip(second, third, strict=True)],
        Sampling(temperature=1.3, max_new_tokens=8, seed=2),
    )
    for prompt, g in zip(third, sampled, strict=True):
        with torch.no_grad():
            logits = policy.model(torch.tensor([prompt + g.token_ids])).logits[0].float()
        lp = torch.log_softmax(logits[len(prompt) - 1 : -1], -1).gather(
            -1, torch.tensor(g.token_ids)[:, None]
        )
        assert lp[:, 0].tolist() == pytest.approx(g.logprobs, abs=1e-4)


def test_rollout_with_kv_reuse_equals_rollout_without(tiny_model):
    """Whole greedy BabyAI episodes through the rollout engine: the same token sequences with the
    per-episode KV cache as without it."""
    from agentgym_train.rollout.engine import RolloutEngine, Task
    from agentgym_train.rollout.envs import LocalEnvs

    from agentgym.plugins import get_env_spec

    runs = []
    for reuse in (True, False):
        policy = HFPolicy(str(tiny_model), kv_reuse=reuse, **F32)
        engine = RolloutEngine(
            policy,
            {"babyai": LocalEnvs(get_env_spec("babyai"))},
            sampling=Sampling(temperature=0, max_new_tokens=12),
            max_turns=3,
            batch_size=3,  # four episodes through three slots: one joins a batch mid-way
        )
        runs.append(engine.run([Task("babyai", i, split="test") for i in range(4)]))
    with_cache, without = runs
    assert [e.tokens.ids for e in with_cache] == [e.tokens.ids for e in without]
    assert sum(e.num_turns for e in with_cache) > 4  # multi-turn: later turns used the cache
    for a, b in zip(with_cache, without, strict=True):
        assert a.tokens.logprobs == pytest.approx(b.tokens.logprobs, abs=1e-4)


def _eval(args):
    from agentgym.cli import main

    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "env-server"])
def test_tiny_model_evaluates_end_to_end_on_babyai(tiny_model, tmp_path, remote):
    out = tmp_path / "r.json"
    args = [
        "eval",
        "--env",
        "babyai",
        "--split",
        "test",
        "--policy",
        "hf",
        "--model",
        str(tiny_model),
        "--limit",
        "3",
        "--n",
        "2",
        "--max-turns",
        "2",
        "--max-new-tokens",
        "16",
        "--output",
        str(out),
    ]
    if remote:
        with serve_in_thread(["babyai"]) as url:
            assert _eval([*args, "--env-url", url]) == 0
    else:
        assert _eval(args) == 0
    r = json.loads(out.read_text())["envs"]["babyai"]
    assert (r["tasks"], r["episodes"], r["errors"]) == (3, 6, 0)
    assert 0.0 <= r["success"] <= 1.0 and 1 <= r["mean_turns"] <= 2
    for ep in read_episodes(tmp_path / "r.episodes.jsonl"):
        assert ep.policy == "hf" and ep.tokens is not None
        assert sum(ep.tokens.loss_mask) >= ep.num_turns  # every reply's tokens are sampled tokens
        assert ep.tokens.loss_mask[ep.tokens.reward_index] == 1
