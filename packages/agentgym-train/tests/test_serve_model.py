"""``agentgym serve-model``: the real command on loopback, backed by the tiny model, answers like the
``hf`` policy, runs our ``openai`` policy's episodes, and refuses bad requests with JSON errors
while it keeps serving."""

from __future__ import annotations

import httpx
import pytest
from agentgym_train.policies.base import Request, Sampling
from agentgym_train.policies.hf import HFPolicy
from agentgym_train.policies.openai import OpenAIPolicy
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs
from agentgym_train.serving.server import serve_model_in_process

from agentgym.plugins import get_env_spec

CONVERSATIONS = [
    [{"role": "user", "content": "I am thinking of a number between 1 and 100."}],
    [
        {"role": "system", "content": "You are playing guess the number."},
        {"role": "user", "content": "Higher."},
        {"role": "assistant", "content": "Thought: The middle of 1..100 is 50.\nAction: guess 50"},
        {"role": "user", "content": "Lower."},
    ],
]


@pytest.fixture(scope="module")
def served(tiny_model):
    """The base URL of ``agentgym serve-model TINY`` run as a user runs it, in a process of its own."""
    with serve_model_in_process(str(tiny_model), "--max-tokens", "16") as url:
        yield url


@pytest.fixture(scope="module")
def hf(tiny_model):
    return HFPolicy(str(tiny_model), device="cpu")


def _post(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/chat/completions", json=body, timeout=60)


def test_models_lists_the_served_model(served, tiny_model):
    data = httpx.get(f"{served}/models", timeout=10).json()["data"]
    assert [m["id"] for m in data] == [tiny_model.name]
    # the model id named, or none: both are this model
    assert _post(served, model=tiny_model.name, messages=CONVERSATIONS[0], max_tokens=2).status_code == 200


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_greedy_replies_equal_the_hf_policy(served, hf, messages):
    r = _post(served, messages=messages, temperature=0, max_tokens=12, logprobs=True, return_token_ids=True)
    assert r.status_code == 200, r.text
    body = r.json()
    (gen,) = hf.generate([Request(messages=messages)], Sampling(temperature=0.0, max_new_tokens=12))
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": gen.text}
    assert choice["token_ids"] == gen.token_ids
    assert [t["logprob"] for t in choice["logprobs"]["content"]] == pytest.approx(gen.logprobs, abs=1e-4)
    assert choice["finish_reason"] == ("stop" if gen.stopped else "length")
    prompt = len(hf.chat.start(messages))
    assert body["usage"] == {
        "prompt_tokens": prompt,
        "completion_tokens": len(gen.token_ids),
        "total_tokens": prompt + len(gen.token_ids),
    }
    assert body["object"] == "chat.completion" and body["model"]


def test_sampling_n_seed_stop_and_the_default_length(served):
    ask = {"messages": CONVERSATIONS[0], "temperature": 1.0, "top_p": 0.9, "n": 3, "seed": 7}
    first, again = (
        _post(served, max_completion_tokens=8, **ask).json(),
        _post(served, max_tokens=8, **ask).json(),
    )
    assert len(first["choices"]) == 3 and [c["index"] for c in first["choices"]] == [0, 1, 2]
    assert first["choices"] == again["choices"]  # a seed gives the same choices
    assert first["usage"]["completion_tokens"] == 3 * 8  # untrained: none stops early
    assert all(c["finish_reason"] == "length" for c in first["choices"])
    text = first["choices"][0]["message"]["content"]
    stop = text[len(text) // 2 :][:2]
    cut = _post(served, max_tokens=8, stop=[stop], **ask).json()["choices"][0]
    assert cut["message"]["content"] == text[: text.find(stop)] and cut["finish_reason"] == "stop"
    default = _post(served, messages=CONVERSATIONS[0], temperature=0).json()  # the server's --max-tokens
    assert default["usage"]["completion_tokens"] <= 16


BAD = [
    ({"messages": CONVERSATIONS[0], "stream": True}, 400, "stream"),
    ({"messages": []}, 400, "messages"),
    ({"messages": CONVERSATIONS[0], "temperature": -1}, 400, "temperature"),
    ({"messages": CONVERSATIONS[0], "max_tokens": 0}, 400, "max_tokens"),
    ({"messages": CONVERSATIONS[0], "n": 0}, 400, "n"),
    ({"messages": CONVERSATIONS[0], "max_tokens": 10**7}, 400, "context"),
    ({"messages": [{"role": "tool", "content": "x"}]}, 400, "role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "text"),
    ({"messages": CONVERSATIONS[0], "model": "not-this-one"}, 404, "not served"),
    ({"prompt": "completions, not chat"}, 400, "messages"),
]


def test_bad_requests_get_json_errors_and_the_server_keeps_serving(served):
    for body, status, words in BAD:
        r = _post(served, **body)
        assert r.status_code == status, (body, r.text)
        error = r.json()["error"]
        assert words in error["message"] and error["type"] == "invalid_request_error", error
    r = httpx.post(f"{served}/chat/completions", content=b"{not json", timeout=10)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    assert httpx.get(f"{served}/nothing-here", timeout=10).json()["error"]["message"] == "Not Found"
    assert _post(served, messages=CONVERSATIONS[0], max_tokens=3).status_code == 200


def test_the_openai_policy_runs_the_episodes_the_hf_policy_runs(served, hf):
    """Through the server, greedy episodes of our ``openai`` policy are the ``hf`` policy's on the
    same messages: the same replies, actions and returns."""
    spec = get_env_spec("guess")
    sampling = Sampling(temperature=0.0, max_new_tokens=16)
    tasks = [Task("guess", t) for t in spec.splits["test"].task_ids[:2]]

    def episodes(policy):
        engine = RolloutEngine(policy, {"guess": LocalEnvs(spec)}, sampling=sampling, max_turns=3)
        return engine.run(tasks)

    remote, local = episodes(OpenAIPolicy(base_url=served)), episodes(hf)
    assert [e.termination for e in remote] == [e.termination for e in local]
    assert all(e.error is None for e in remote) and all(e.num_turns > 0 for e in remote)
    assert [[s.raw_output for s in e.steps] for e in remote] == [
        [s.raw_output for s in e.steps] for e in local
    ]
    assert [e.return_ for e in remote] == [e.return_ for e in local]
    assert [m.content for m in remote[0].messages] == [m.content for m in local[0].messages]
