"""vLLM for real (CPU build, hatch environment ``vllm``: ``hatch run vllm:test``): the ``vllm``
policy on the tiny model, the ``openai`` policy against vLLM's OpenAI-compatible server, and the
native trainer rolling out through a colocated engine (``rollout=vllm``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from agentgym.testing import import_or_skip

pytestmark = pytest.mark.vllm
import_or_skip("vllm", reason="vLLM is installed in the hatch environment 'vllm' (hatch run vllm:test)")

from agentgym_train.policies import make_policy  # noqa: E402
from agentgym_train.policies.base import Request, Sampling  # noqa: E402
from agentgym_train.rollout.evaluate import evaluate  # noqa: E402

from agentgym.server.background import free_port  # noqa: E402


@pytest.fixture(scope="module")
def vllm_policy(tiny_model):
    return make_policy("vllm", model=str(tiny_model), dtype="float32", max_model_len=2048)


def test_vllm_policy_generates_ids_and_model_logprobs(vllm_policy, tiny_model):
    import torch
    from transformers import AutoModelForCausalLM

    chat = vllm_policy.chat
    messages = [
        {"role": "system", "content": "Play."},
        {"role": "user", "content": "I am thinking of a number."},
    ]
    prompt = chat.start(messages)
    gens = vllm_policy.generate(
        [Request(messages, prompt_ids=prompt)] * 2, Sampling(max_new_tokens=12, seed=5)
    )
    hf = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    for g in gens:
        assert 1 <= len(g.token_ids) <= 12 and len(g.logprobs) == len(g.token_ids)
        assert g.stopped == (g.token_ids[-1] in chat.stop_ids)
        with torch.no_grad():
            logits = hf(torch.tensor([prompt + g.token_ids])).logits[0]
        lp = torch.log_softmax(logits[len(prompt) - 1 : -1], -1).gather(
            -1, torch.tensor(g.token_ids)[:, None]
        )[:, 0]
        assert lp.tolist() == pytest.approx(g.logprobs, abs=2e-3)


def test_a_batch_of_long_seeded_prompts_samples_on_cpu(vllm_policy):
    """More prompt tokens than one engine step takes (vLLM's default 4,096 would prefill some in
    chunks, and vLLM 0.32 on CPU then fails every seeded request of the batch): each request gets
    its reply, and its own seed makes it repeatable."""
    chat = vllm_policy.chat
    prompts = [chat.start([{"role": "user", "content": f"I am thinking of {k}. " * 60}]) for k in range(64)]
    assert min(map(len, prompts)) > 300
    requests = [Request([], prompt_ids=p, seed=k) for k, p in enumerate(prompts)]  # > 19,000 prompt tokens
    sampling = Sampling(temperature=1.0, max_new_tokens=6)
    first, again = vllm_policy.generate(requests, sampling), vllm_policy.generate(requests, sampling)
    assert all(g.token_ids for g in first)
    assert [g.token_ids for g in first] == [g.token_ids for g in again]
    assert len({tuple(g.token_ids) for g in first}) > 1  # the seeds differ, so do the replies


def test_an_engine_starts_after_the_search_envs_retriever_loaded_numba(tiny_model):
    """bm25s imports numba, numba llvmlite, whose ``ffi.lib`` broke vLLM 0.32's start-up scan of
    every module (the Search recipe's evaluation failed so after its demonstrations). In a process
    of its own: closing an engine breaks the other engines of its process (the module's)."""
    code = f"""
import sys
import agentgym
from agentgym_train.policies import make_policy
from agentgym_train.policies.base import Request, Sampling
env = agentgym.make("search")
env.reset(options={{"task_id": 0}})
env.step("<search> a river </search>")
assert "llvmlite.binding.ffi" in sys.modules  # the module that broke the scan is loaded
policy = make_policy("vllm", model={str(tiny_model)!r}, dtype="float32", max_model_len=512)
prompt = policy.chat.start([{{"role": "user", "content": "Hello."}}])
assert policy.generate([Request([], prompt_ids=prompt)], Sampling(max_new_tokens=4))[0].token_ids
assert "llvmlite.binding.ffi" in sys.modules  # back where it was
print("engine ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "engine ok" in out.stdout, out.stderr[-2000:]


def test_an_engine_on_cpu_reserves_a_small_kv_cache_unless_told(tiny_model):
    """Left to vLLM, an engine on CPU reserves 90% of the machine's memory for its KV cache (a
    second engine in the process then cannot start): unless VLLM_CPU_KVCACHE_SPACE says otherwise,
    the policy reserves CPU_KV_CACHE_GB. In a process of its own: shutting an engine down here
    would disturb the module's engine."""
    from agentgym_train.policies.vllm import CPU_KV_CACHE_GB

    code = f"""
from agentgym_train.policies import make_policy
from agentgym_train.policies.base import Request, Sampling
policy = make_policy("vllm", model={str(tiny_model)!r}, dtype="float32", max_model_len=2048)
prompt = policy.chat.start([{{"role": "user", "content": "Hi"}}])
assert policy.generate([Request([], prompt_ids=prompt)], Sampling(max_new_tokens=4))[0].token_ids
print(policy.llm.llm_engine.vllm_config.cache_config.kv_cache_memory_bytes)
"""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip().splitlines()[-1]) == CPU_KV_CACHE_GB << 30


def test_vllm_policy_evaluates_babyai(vllm_policy):
    report, episodes = evaluate(
        ["babyai"], vllm_policy, split="test", limit=2, n=2, max_turns=2, sampling=Sampling(max_new_tokens=16)
    )
    r = report["envs"]["babyai"]
    assert (r["tasks"], r["episodes"], r["errors"]) == (2, 4, 0)
    assert all(e.tokens is not None and e.tokens.loss_mask[e.tokens.reward_index] == 1 for e in episodes)


@pytest.fixture(scope="module")
def vllm_server(tiny_model):
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(tiny_model),
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--enforce-eager",
            "--served-model-name",
            "tiny",
            "--seed",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    import httpx

    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    try:
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"vLLM server did not start: {proc.stderr.read().decode()[-2000:] if proc.poll() is not None else 'timeout'}"
                )
            time.sleep(1)
        yield url + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_openai_policy_against_vllms_server(vllm_server, vllm_policy):
    policy = make_policy("openai", base_url=vllm_server, concurrency=4)
    policy.token_ids = True
    report, episodes = evaluate(
        ["guess"],
        policy,
        split="test",
        limit=3,
        n=2,
        max_turns=3,
        sampling=Sampling(max_new_tokens=16, seed=1),
    )
    r = report["envs"]["guess"]
    assert policy.model == "tiny"  # asked the server which model it serves
    assert (r["tasks"], r["episodes"], r["errors"]) == (3, 6, 0)
    for ep in episodes:
        assert ep.policy == "openai" and ep.num_turns >= 1
        assert all(s.raw_output is not None for s in ep.steps)


def test_openai_policy_returns_vllm_token_ids_and_logprobs(vllm_server, vllm_policy):
    policy = make_policy("openai", base_url=vllm_server, token_ids=True)
    messages = [{"role": "system", "content": "Play."}, {"role": "user", "content": "Higher."}]
    (g,) = asyncio.run(policy.agenerate([Request(messages)], Sampling(max_new_tokens=10, seed=2)))
    assert g.error is None and g.token_ids and len(g.logprobs) == len(g.token_ids)
    # The ids are the model's own tokens: decoding them gives the text (the end-of-turn token aside).
    tok = vllm_policy.tokenizer
    stop = set(vllm_policy.chat.stop_ids)
    assert tok.decode([t for t in g.token_ids if t not in stop]) == g.text


# -- the native trainer rolling out through a colocated engine (rollout=vllm) ----------------------
def _colocated_run(tiny_model, tmp_path, **extra):
    """Two GRPO steps of the tiny model sampled by an in-process vLLM engine; the trainer, set up
    and trained but not closed (its engine still answers)."""
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.trainer import Trainer

    cfg = TrainConfig.from_dict(
        {
            "name": "v",
            "runs_dir": str(tmp_path),
            "model": str(tiny_model),
            "envs": ["guess"],
            "rollout": "vllm",
            "dtype": "float32",  # both engines in float32: their log-probs compare to ~1e-6
            "steps": 2,
            "tasks_per_step": 2,
            "n": 2,
            "max_new_tokens": 12,
            "horizon": "scaling_inter",
            "horizon_params": {"rounds": [2], "every": 1},
            "val_limit": 1,
            "val_n": 1,
            "lr": 1e-3,
            "micro_batch_tokens": 512,
            "progress": False,
            **extra,
        }
    )
    trainer = Trainer(cfg)
    trainer.setup()
    trainer.train()
    return trainer


def _engine_logprobs(policy, ids):
    """The engine's log-probability of each token of ``ids`` after the first (prompt log-probs)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    (out,) = policy.llm.generate(
        [TokensPrompt(prompt_token_ids=ids)], SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False
    )
    return [out.prompt_logprobs[i][t].logprob for i, t in enumerate(ids) if i]


def _model_logprobs(model, ids):
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()


def _check_synced(trainer, tiny_model):
    """The run wrote its metrics and episodes, and the engine now scores a sampled sequence as the
    learner's current model does, not as the starting weights did; that sequence."""
    import torch
    from transformers import AutoModelForCausalLM

    from agentgym.trajectory import read_episodes

    run = trainer.run_dir
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["time_sync"] >= 0 for r in rows)
    assert all(r["trained_tokens"] > 0 for r in rows)
    episodes = list(read_episodes(run / "episodes" / "step_000002.jsonl"))
    assert len(episodes) == 4 and all(e.policy == "vllm" for e in episodes)
    assert (run / "episodes" / "val_step_000002.jsonl").is_file()
    ids = next(e.tokens.ids for e in episodes if e.tokens is not None and sum(e.tokens.loss_mask))
    engine = _engine_logprobs(trainer.policy, ids)
    learner = _model_logprobs(trainer.learner.model.eval(), ids)
    start = _model_logprobs(AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32), ids)
    assert engine == pytest.approx(learner, abs=1e-4)
    assert max(abs(a - b) for a, b in zip(engine, start, strict=True)) > 1e-2  # the weights did move
    return ids


def test_trainer_rolls_out_through_a_colocated_engine_given_the_trained_weights(tiny_model, tmp_path):
    from agentgym_train.rl.trainer import Trainer

    trainer = _colocated_run(tiny_model, tmp_path)
    try:
        ids = _check_synced(trainer, tiny_model)
    finally:
        trainer.close()
    resumed = Trainer(trainer.cfg)  # a new engine loads the starting weights; setup gives it the checkpoint's
    resumed.setup()
    try:
        assert resumed.step == 2
        assert _engine_logprobs(resumed.policy, ids) == pytest.approx(
            _model_logprobs(resumed.learner.model.eval(), ids), abs=1e-4
        )
    finally:
        resumed.close()


def test_lora_adapters_reach_the_engine_merged_and_the_base_stays_untouched(tiny_model, tmp_path):
    import torch
    from safetensors.torch import load_file

    trainer = _colocated_run(
        tiny_model, tmp_path, lora=True, lora_r=4, kl_coef=0.01, rollout_kv_cache_gb=0.25
    )
    try:
        # the run's KV cache is the config's, not the policy's default
        assert trainer.policy.llm.llm_engine.vllm_config.cache_config.kv_cache_memory_bytes == 1 << 28
        _check_synced(trainer, tiny_model)
        # the sync read the merged weights without merging into the model: its base (the KL
        # reference) is still the checkpoint's, bit for bit
        start = load_file(next(iter(tiny_model.glob("*.safetensors"))))
        for key, value in trainer.learner.model.state_dict().items():
            name = key.removeprefix("base_model.model.").replace(".base_layer", "")
            if "lora_" not in key and name in start:
                assert torch.equal(value, start[name].to(value.dtype)), key
    finally:
        trainer.close()


def test_a_closed_engine_gives_its_memory_back_and_another_starts(tiny_model):
    """A recipe builds an engine per phase: closing one frees its KV cache (resident memory falls)
    and the next engine in the same process samples as before."""
    from agentgym_train.models.memory import release_memory

    def rss_gb() -> float:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 2**20

    release_memory()
    before = rss_gb()
    policy = make_policy("vllm", model=str(tiny_model), dtype="float32", max_model_len=2048)
    request = Request(messages=[{"role": "user", "content": "Your goal: go to the red ball."}])
    first = policy.generate([request], Sampling(temperature=0.0, max_new_tokens=8))[0]
    held = rss_gb() - before
    policy.close()
    assert not hasattr(policy, "llm")
    assert rss_gb() - before < held / 2, (held, rss_gb() - before)  # the KV cache (1 GB) went back
    policy.close()  # twice: nothing left to close
    again = make_policy("vllm", model=str(tiny_model), dtype="float32", max_model_len=2048)
    try:
        assert again.generate([request], Sampling(temperature=0.0, max_new_tokens=8))[0].text == first.text
    finally:
        again.close()


@pytest.mark.parametrize("level", [None, "INFO"], ids=["quiet", "asked"])
def test_an_engine_logs_nothing_the_user_must_not_act_on_unless_asked(tiny_model, level):
    """Built and sampled in a process of its own: vLLM's INFO and WARNING lines (its format, e.g.
    ``INFO 12-04 04:41:53 [core.py:133]``) stay out of the output by default, and
    ``VLLM_LOGGING_LEVEL=INFO`` brings them back; the variable is not left set for later processes."""
    import re

    code = (
        "import os; from agentgym_train.policies import make_policy; "
        "from agentgym_train.policies.base import Request, Sampling; "
        f"p = make_policy('vllm', model={str(tiny_model)!r}, dtype='float32', max_model_len=2048); "
        "p.generate([Request([{'role': 'user', 'content': 'hi'}])], Sampling(max_new_tokens=4, seed=1)); "
        "print('LEVEL', os.environ.get('VLLM_LOGGING_LEVEL'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "VLLM_LOGGING_LEVEL"}
    if level:
        env["VLLM_LOGGING_LEVEL"] = level
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"LEVEL {level}" in done.stdout
    output = done.stdout + done.stderr  # vLLM logs to stdout by default
    logged = re.findall(r"(?:INFO|WARNING) \d\d-\d\d [\d:]+ \[\w+\.py:\d+\]", output)
    assert (len(logged) > 5) if level else logged == [], output[-3000:]
