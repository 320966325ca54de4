"""vLLM for real (CPU build, hatch environment ``vllm``: ``hatch run vllm:test``): the ``vllm``
policy on the tiny model, and the ``openai`` policy against vLLM's OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM is installed in the hatch environment 'vllm' (hatch run vllm:test)")

from agentgym_train.evaluate import evaluate  # noqa: E402
from agentgym_train.policies import make_policy  # noqa: E402
from agentgym_train.policies.base import Request, Sampling  # noqa: E402

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
