"""The TextEnv protocol's shared behaviour, on the example env."""

from __future__ import annotations

import math
import random

import pytest

import agentgym
from agentgym.errors import EpisodeOverError, UnknownTaskError
from agentgym.spaces import MAX_ACTION_CHARS, TextSpace
from agentgym.spec import EnvSpec, Split


def test_reset_fills_the_info_the_framework_relies_on():
    env = agentgym.make("guess")
    obs, info = env.reset(options={"task_id": 1004})
    assert info["task_id"] == 1004
    assert info["category"] == "large"  # from the spec's split categories
    assert "guess <number>" in info["instruction"]
    _, _, _, _, info = env.step("guess 1")
    assert info["valid_action"] is True and info["success"] is False and info["raw_score"] == 0.0


def test_bare_reset_with_a_seed_picks_a_train_task_deterministically():
    a, b = agentgym.make("guess"), agentgym.make("guess")
    assert a.reset(seed=7) == b.reset(seed=7)
    assert a.reset(seed=7)[1]["task_id"] in agentgym.env_specs()["guess"].splits["train"]


@pytest.mark.parametrize("bad", ["seven", -3, 2.5j])
def test_bad_task_ids_are_rejected(bad):
    with pytest.raises(ValueError, match="task_id"):
        agentgym.make("guess").reset(options={"task_id": bad})


@pytest.mark.parametrize("task_id", [1100, 1101, 10**12])
def test_an_id_in_no_split_is_refused_not_wrapped(task_id):
    env = agentgym.make("guess")
    env.reset(options={"task_id": 1099})
    with pytest.raises(UnknownTaskError) as exc:
        env.reset(options={"task_id": task_id})
    assert str(exc.value) == f"unknown task id {task_id} for guess: valid train 0..999, test 1000..1099"
    assert isinstance(exc.value, ValueError) and exc.value.code == "unknown_task"
    assert env.task_id == 1099 and env.step("guess 1")[4]["valid_action"]  # the episode goes on


class _AnyId(agentgym.TextEnv):
    def reset_task(self, task_id):
        return f"task {task_id}", {"instruction": "say done"}


@pytest.mark.parametrize(
    ("spec_kwargs", "task_id", "refused"),
    [
        ({"splits": {"test": Split(range(10))}, "open_task_ids": True}, 10**9, False),  # BabyAI's way
        ({}, 10**9, False),  # no splits: nothing to check against
        ({"splits": {"test": Split([])}}, 5, False),
        ({"splits": {"train": Split(range(10**15))}}, 10**15 - 1, False),  # a huge range: O(1)
        ({"splits": {"train": Split(range(10**15))}}, 10**15, True),
        ({"splits": {"a": Split([1, 5]), "b": Split([8])}}, 3, True),
    ],
)
def test_which_ids_the_base_class_refuses(spec_kwargs, task_id, refused):
    env = EnvSpec(name="anyid", factory=_AnyId, **spec_kwargs).make()
    if refused:
        with pytest.raises(UnknownTaskError, match=f"^unknown task id {task_id} for anyid: valid "):
            env.reset(options={"task_id": task_id})
    else:
        assert env.reset(options={"task_id": task_id})[0] == f"task {task_id}"
    assert EnvSpec(name="plain", factory=_AnyId).open_task_ids is False


def test_an_unknown_task_id_over_http_is_a_json_error_and_the_server_keeps_serving(server):
    import httpx

    url = server(["guess"])
    with httpx.Client(base_url=url) as c:
        r = c.post("/v1/sessions", json={"env": "guess", "task_id": 1100})
        assert r.status_code == 422, r.text
        assert r.json() == {
            "error": {
                "code": "unknown_task",
                "message": "unknown task id 1100 for guess: valid train 0..999, test 1000..1099",
            }
        }
        sid = c.post("/v1/sessions", json={"env": "guess", "task_id": 4}).json()["session_id"]
        assert c.post(f"/v1/sessions/{sid}/reset", json={"task_id": 5000}).json()["error"]["code"] == (
            "unknown_task"
        )
        assert c.post(f"/v1/sessions/{sid}/step", json={"action": "guess 1"}).status_code == 200
        batch = c.post("/v1/reset", json={"resets": [{"session_id": sid, "task_id": 1100}]}).json()
        assert batch["results"][0]["error"]["code"] == "unknown_task"
        # AgentGym's own routes: the same error; the session and the server go on
        env_id = c.post("/create").json()["id"]
        r = c.post("/reset", json={"id": env_id, "data_idx": 1100})
        assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_task"
        assert c.post("/reset", json={"id": env_id, "data_idx": 1099}).status_code == 200
        assert c.post("/step", json={"id": env_id, "action": "guess 1"}).status_code == 200


def test_over_long_and_non_text_actions_are_observations():
    env = agentgym.make("guess")
    env.reset(options={"task_id": 0})
    obs, reward, terminated, _, info = env.step("guess 1" + " " * MAX_ACTION_CHARS)
    assert "too long" in obs and info["valid_action"] is False and not terminated
    obs, *_ = env.step(b"guess 1")
    assert "bytes" in obs


def test_step_after_the_end_and_before_reset_are_errors():
    env = agentgym.make("guess")
    with pytest.raises(EpisodeOverError, match="reset"):
        env.step("guess 1")
    env.reset(options={"task_id": 0})  # small range: 1..10
    for n in range(1, 11):
        *_, terminated, truncated, info = env.step(f"guess {n}")
        if terminated:
            break
    assert info["success"]
    with pytest.raises(EpisodeOverError):
        env.step("guess 1")


def test_return_is_the_sum_of_step_rewards():
    env = agentgym.make("guess")
    env.reset(options={"task_id": 3})
    total = 0.0
    for n in range(1, 11):
        _, reward, terminated, _, info = env.step(f"guess {n}")
        total += reward
        if terminated:
            break
    assert total == env.score == info["raw_score"] == 1.0


def test_reward_to_makes_partial_credit_sum_to_exactly_one():
    # Increments of a 0-100 score scaled to [0, 1]: their plain float sum drifts (0.6 + 0.3 + 0.1 is
    # 0.9999999999999999); rewards from reward_to reach a return of exactly 1.0 whatever came before,
    # and every partial return within a few ulps of its score, never below it (a failure's 0 stays >= 0).
    env = agentgym.make("guess")
    assert 0.6 + 0.3 + 0.1 != 1.0
    for trial in range(3000):
        rng = random.Random(trial)
        env.rewards, points = [], 0
        while points < 100:
            points = max(0, min(100, points + rng.choice([1, 2, 3, 7, 8, 10, 13, 20, 25, 33, -5])))
            env.rewards.append(env.reward_to(points / 100))
            assert 0 <= env.score - points / 100 <= 4 * math.ulp(max(points / 100, 0.01))
        assert env.score == math.fsum(env.rewards) == 1.0


def test_rejected_actions_read_like_the_envs_other_observations():
    env = agentgym.make("guess")
    env.reset(options={"task_id": 3})
    obs, reward, terminated, _, info = env.step("   ")
    assert obs == "Invalid action: the action is empty." and not info["valid_action"] and reward == 0
    assert env.last_observation == obs  # what GET .../observation answers next
    env.available_actions = lambda: ["guess 1", "guess 2"]
    assert (
        env.step("")[0] == 'Invalid action: the action is empty.\nAvailable actions: ["guess 1", "guess 2"]'
    )


def test_text_space_accepts_real_text_and_rejects_the_rest():
    space = TextSpace(60)
    assert space.contains("Wrong: the number is lower than 827. 6 guesses left.")
    assert space.contains("Zürich — 東京 🙂")
    assert not space.contains("x" * 61)
    assert not space.contains(b"bytes")
    assert not space.contains("nul\x00")
    assert not space.contains("\ud800")  # lone surrogate
    assert space.contains(space.sample())


def test_spec_validation_and_gym_ids():
    with pytest.raises(ValueError, match="env name"):
        EnvSpec(name="Bad Name", factory=object)
    spec = EnvSpec(name="web-arena", factory=object, version=2)
    assert spec.gym_id == "agentgym/WebArena-v2"
    split = Split(range(4), {"a": [0, 1], "b": [2, 3]})
    assert split.category_of(3) == "b" and split.category_counts() == {"a": 2, "b": 2} and len(split) == 4


class _Generated(agentgym.TextEnv):
    """A task generated on reset (counted), with a copy it can save and load."""

    generated = 0

    def reset_task(self, task_id):
        type(self).generated += 1
        self.state = [task_id, random.random()]  # a generation no later one repeats
        return f"task {task_id}: {self.state[1]}", {"instruction": "say done"}

    def step_action(self, action):
        self.state.append(action)
        return f"{self.state}", 1.0, action == "done", False, {}

    def save_reset(self, observation, info):
        return (list(self.state), observation, dict(info))

    def load_reset(self, saved):
        state, observation, info = saved
        self.state = list(state)
        return observation, dict(info)


def test_a_reset_made_twice_is_saved_and_later_ones_start_from_copies(monkeypatch):
    """``agentgym.resets``: the first reset of a (class, task, seed) is not saved (a pass over
    distinct tasks pays nothing), the second is, later ones load a copy that a played episode
    does not change; the cache is bounded and ``size=0`` turns it off."""
    from agentgym.resets import ResetCache

    cache = ResetCache(size=2)
    monkeypatch.setattr("agentgym.env.RESETS", cache)
    a, b = _Generated(), _Generated()
    first = a.reset(options={"task_id": 1})
    second = a.reset(options={"task_id": 1})
    assert _Generated.generated == 2 and cache.saves == 1 and first != second
    a.step("move")  # played on the instance the saved reset was made on
    assert b.reset(options={"task_id": 1}) == second and b.state == a.state[:2]
    b.step("done")
    assert a.reset(options={"task_id": 1}) == second and a.state == b.state[:2]
    assert _Generated.generated == 2 and cache.hits == 2
    assert a.reset(seed=5, options={"task_id": 1}) != second  # another seed is another reset
    for task in (2, 2, 3, 3):  # two more saved: the cache holds two, task 1 is dropped
        a.reset(options={"task_id": task})
    assert len(cache) == 2
    made = _Generated.generated
    a.reset(options={"task_id": 1})
    assert _Generated.generated == made + 1
    monkeypatch.setattr("agentgym.env.RESETS", ResetCache(size=0))
    for _ in range(3):
        a.reset(options={"task_id": 9})
    assert _Generated.generated == made + 4
