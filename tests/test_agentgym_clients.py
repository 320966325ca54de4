"""AgentGym's own env clients against ``agentgym serve``, call for call.

The clients are ``BabyAIEnvClient``, ``TextCraftEnvClient``, ``SciworldEnvClient`` and
``SearchQAEnvClient`` and ``WebarenaEnvClient`` (public repo
WooooDyy/AgentGym, ``agentenv/agentenv/envs/<env>.py``), driven by ``BaseTask``'s experience loop and
scored by the ``Evaluator`` (``agentenv/controller/``). Their package is not installable here (PyPI's
``agentenv`` 0.0.1 is an empty placeholder), so each test makes exactly the HTTP calls the client makes,
in its order, with ``requests`` as it does: the same methods, paths, JSON bodies and ``timeout``; it
asserts status 200 where the client does, and reads exactly the fields the client reads, with ``[]``
(a missing field fails as the client would, with a ``KeyError``). The "model" is the env's expert,
asked through our v1 route for the session the compatible ``/create`` made, and its action is wrapped
in the ReAct text a model writes and cut out again the way each client cuts it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import requests

from agentgym.server.background import serve_in_thread

TIMEOUT = 300  # every client's default


class OriginalClient:
    """What ``BaseEnvClient`` subclasses share: ``_post`` adds the session id and asserts 200."""

    def __init__(self, base: str):
        self.base = base
        self.env_id: int | None = None

    def _post(self, path: str, data: dict) -> dict:
        data["id"] = self.env_id
        res = requests.post(f"{self.base}/{path}", json=data, timeout=TIMEOUT)
        assert res.status_code == 200, res.text
        return res.json()

    def expert_text(self) -> str:
        """The "model's" reply: the expert's next action in the ReAct format the prompts ask for."""
        action = requests.get(f"{self.base}/v1/sessions/{self.env_id}/expert", timeout=TIMEOUT).json()[
            "action"
        ]
        return f"Thought:\nI know what to do next.\n\nAction:\n{action}"


class BabyAIClient(OriginalClient):
    def __init__(self, base: str):
        super().__init__(base)
        ok = requests.post(f"{base}/create", timeout=TIMEOUT)
        assert ok.status_code == 200, ok.text
        self.env_id = ok.json()["id"]

    def reset(self, data_idx: int) -> None:
        r = self._post("reset", {"data_idx": data_idx})
        self.info = {
            "observation": r["observation"],
            "reward": r["reward"],
            "score": r["score"],
            "done": r["done"],
        }

    def step(self, text: str) -> tuple[str, float, bool]:
        if text.endswith("</s>"):
            text = text[:-5]
        parts = text.split("Action:")
        action = parts[1].strip() if len(parts) > 1 else parts[0].strip()
        r = self._post("step", {"action": action})
        self.info = {
            "observation": r["observation"],
            "reward": r["reward"],
            "score": r["score"],
            "done": r["done"],
        }
        return r["observation"], r["score"], r["done"]  # StepOutput(state, reward=score, done)


class SciWorldClient(BabyAIClient):
    """Creates and steps like BabyAI's client; its reset prepends the task description itself."""

    def reset(self, data_idx: int) -> None:
        r = self._post("reset", {"data_idx": data_idx})
        self.info = {
            "observation": r["task_description"] + "\n" + r["observation"],
            "reward": 0,
            "score": 0,
            "done": False,
        }


class TextCraftClient(OriginalClient):
    def __init__(self, base: str):
        super().__init__(base)
        body = {"minecraft_dir": "agentenv_textcraft/", "commands": None, "goal": None}
        ok = requests.post(f"{base}/create", timeout=TIMEOUT, json=body)
        assert ok.status_code == 200, ok.text
        ok = ok.json()
        self.env_id = ok["id"]
        self.info = {"observation": ok["observation"], "reward": 0, "done": False}

    def reset(self, idx: int) -> None:
        r = self._post("reset", {"data_idx": idx})
        self.info.update({"observation": r["observation"], "reward": 0, "done": False})

    def step(self, text: str) -> tuple[str, float, bool]:
        matches = re.findall(r"Action:\s*(.*?)(?=\n|$)", text, re.DOTALL)
        if len(matches) > 1:
            return "Error: Only one 'Action' is allowed per response.", 0, False
        action = matches[-1] if matches else ""
        action = " ".join(re.sub(r"[^A-Za-z0-9, ]+", "", action).split()).strip()
        if action.lower() == "look":
            action = "inventory"
        r = self._post("step", {"action": action})
        self.info = {"observation": r["observation"], "reward": r["reward"], "done": r["done"]}
        return r["observation"], r["reward"], r["done"]

    def close(self) -> dict:
        return self._post("close", {})


class SearchQAClient:
    """``SearchQAEnvClient``: another dialect. ``/create {"id": 0}`` answers the bare session id; every
    later call sends it as ``env_idx`` (``reset`` names the question ``id``); ``GET /observation``
    answers the question; ``step`` sends the model's whole output."""

    def __init__(self, base: str):
        self.base = base
        ok = requests.post(f"{base}/create", json={"id": 0}, timeout=TIMEOUT)
        if ok.status_code != 200:
            raise RuntimeError(f"Failed to create environment: {ok}")  # the client's RequestException
        self.env_id = ok.json()

    def _post(self, path: str, data: dict) -> dict:
        data["env_idx"] = self.env_id
        res = requests.post(f"{self.base}/{path}", json=data, timeout=TIMEOUT)
        assert res.status_code == 200, res.text
        return res.json()

    def observe(self) -> str:
        res = requests.get(f"{self.base}/observation?env_idx={self.env_id}", timeout=TIMEOUT)
        assert res.status_code == 200
        return res.json()

    def reset(self, id: int) -> dict:
        return self._post("reset", {"id": id})

    def step(self, text: str) -> tuple[str, float, bool]:
        r = self._post("step", {"action": text})
        return r["observation"], r["reward"], r["done"]

    def close(self) -> dict:
        return self._post("close", {})


class WebArenaClient(SearchQAClient):
    """``WebarenaEnvClient``: ``/create`` with no body answers ``{"env_idx"}``; ``reset`` sends
    ``{"seed": 0, "idx"}``; ``step`` sends the model's whole text (refused locally without a ```
    block) and counts the reward only when ``terminated``."""

    def __init__(self, base: str):
        self.base = base
        ok = requests.post(f"{base}/create", timeout=TIMEOUT)
        if ok.status_code != 200:
            raise RuntimeError(f"Failed to create environment: {ok}")
        self.env_id = ok.json()["env_idx"]

    def reset(self, idx: int) -> dict:
        response = self._post("reset", {"seed": 0, "idx": idx})
        if response["observation"] == "TimeoutError":
            raise TimeoutError(idx)
        return response

    def step(self, text: str) -> tuple[str, float, bool]:
        if not re.findall(r"```(.*?)```", text, re.DOTALL):
            return "Cannot parse action from response.", 0, False
        r = self._post("step", {"action": text})
        reward = r["reward"] if r["terminated"] else 0
        return r["observation"], reward, r["terminated"]


def run_task(client: OriginalClient, idx: int, max_rounds: int) -> tuple[float, list[str]]:
    """``BaseTask._generate_experience_one``: reset, observe, then step until done or the round cap;
    the experience's reward is the last step's. Returns it and the observations seen."""
    client.reset(idx)
    observations, reward, done, rounds = [client.info["observation"]], 0.0, False, 0
    while not done:
        state, reward, done = client.step(client.expert_text())
        observations.append(state)
        rounds += 1
        if rounds >= max_rounds:
            break
    return reward, observations


@pytest.fixture(scope="module")
def babyai() -> Iterator[str]:
    with serve_in_thread(["babyai"]) as url:
        yield url


def test_babyai_client_plays_and_scores_like_the_original(babyai):
    assert requests.get(babyai + "/", timeout=TIMEOUT).json() == "This is environment BabyAI."
    client = BabyAIClient(babyai)
    rewards = []
    for idx in (0, 1, 41, 80):  # data_idx % 40 picks the level, // 40 the seed
        reward, observations = run_task(client, idx, max_rounds=20)
        assert observations[0].startswith("Your goal: ")
        assert observations[0].rstrip().endswith('"]')  # `Available actions: ["..."]` closes it
        assert client.info["done"] is True
        rewards.append(reward)
    # The original score: 1 - 0.9 * primitive steps / the level's step budget, summed over the episode.
    assert all(0.0 < r <= 1.0 for r in rewards)
    # The same task id replays the same episode.
    assert run_task(client, 41, max_rounds=20)[1] == run_task(client, 41, max_rounds=20)[1]


def test_textcraft_client_creates_resets_solves_and_closes():
    with serve_in_thread(["textcraft"]) as url:
        client = TextCraftClient(url)
        assert "Goal: craft" in client.info["observation"]  # the constructor's first observation
        successes = []
        for idx in (0, 5, 120, 400):
            reward, observations = run_task(client, idx, max_rounds=40)
            assert observations[0].startswith("Crafting commands:")
            successes.append(reward == 1)  # the Evaluator's success: reward == 1
        assert all(successes)
        assert client.close() == {"closed": client.env_id}
        gone = requests.post(
            f"{url}/step", json={"id": client.env_id, "action": "inventory"}, timeout=TIMEOUT
        )
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "unknown_session"


def test_textcraft_create_with_a_custom_goal_is_refused_with_a_reason():
    with serve_in_thread(["textcraft"]) as url:
        r = requests.post(f"{url}/create", json={"commands": None, "goal": "diamond"}, timeout=TIMEOUT)
        assert r.status_code == 422 and "goal" in r.json()["error"]["message"]


@pytest.mark.java
def test_sciworld_client_solves_a_gold_path_with_score_100():
    pytest.importorskip("agentgym_sciworld")
    from agentgym_sciworld.java import JavaNotFoundError, find_java
    from agentgym_sciworld.tasks import task_id_of

    try:
        find_java()
    except JavaNotFoundError as exc:
        pytest.skip(exc.message)
    find = task_id_of("find-living-thing", 230)
    with serve_in_thread(["sciworld"]) as url:
        client = SciWorldClient(url)
        client.reset(find)
        description, look = client.info["observation"].split("\n", 1)
        assert description.startswith("Your task is to") and look.startswith("This room is called")
        assert description not in look  # the client prepends it; the reply's observation is the look alone
        raw = requests.post(f"{url}/step", json={"id": client.env_id, "action": "open door to hallway"})
        step = raw.json()
        assert 0 < step["score"] <= 100 and step["reward"] == step["score"] and step["done"] is False
        score, _ = run_task(client, find, max_rounds=100)
        assert score == 100 and client.info["done"] is True  # the Evaluator counts success as == 100
        # A failed task: the simulator's -100, its change as reward.
        client.reset(find)
        opened = client.step("Action: open door to hallway")[1]
        state, score, done = client.step("Action: focus on painting")
        assert score == -100 and done and client.info["reward"] == -100 - opened
        obs = requests.get(f"{url}/observation", params={"id": client.env_id}, timeout=TIMEOUT)
        assert obs.status_code == 200 and obs.json() == state


def test_searchqa_client_speaks_its_dialect_and_solves_questions():
    pytest.importorskip("agentgym_search")
    with serve_in_thread(["search"]) as url:
        client = SearchQAClient(url)
        assert isinstance(client.env_id, int)
        solved = 0
        for idx in (0, 150, 200, 300):
            client.reset(idx)
            question = client.observe()
            shown = requests.get(f"{url}/v1/sessions/{client.env_id}/observation", timeout=TIMEOUT).json()
            assert question and shown["observation"] == f"Question: {question}"  # the bare question
            done, reward = False, 0.0
            for _ in range(10):
                action = requests.get(f"{url}/v1/sessions/{client.env_id}/expert", timeout=TIMEOUT).json()[
                    "action"
                ]
                # the model's whole output: reasoning, then the tag
                state, reward, done = client.step(f"<think>I should act.</think>\n{action}")
                if done:
                    break
                assert state.startswith("<information>") or "wrong" in state
            solved += reward == 1.0 and done
        assert solved >= 3  # the expert answers only what a retrieved passage holds
        assert client.close() == {"closed": client.env_id}
        gone = requests.get(f"{url}/observation?env_idx={client.env_id}", timeout=TIMEOUT)
        assert gone.status_code == 404


@pytest.mark.browser
def test_webarena_client_speaks_its_dialect_and_solves_a_task():
    pytest.importorskip("agentgym_webarena")
    from agentgym_webarena.browser import BrowserNotFoundError, find_chromium

    try:
        find_chromium()
    except BrowserNotFoundError as exc:
        pytest.skip(exc.message)
    with serve_in_thread(["webarena"]) as url:
        client = WebArenaClient(url)
        assert isinstance(client.env_id, int)
        first = client.reset(0)
        assert first["observation"].startswith("OBSERVATION:") and "OBJECTIVE:" in first["observation"]
        assert client.observe() == first["observation"]
        reward, done = 0.0, False
        for _ in range(15):
            action = requests.get(f"{url}/v1/sessions/{client.env_id}/expert", timeout=TIMEOUT).json()[
                "action"
            ]
            state, reward, done = client.step(f"Let's think step-by-step. In summary: ```{action}```")
            if done:
                break
            assert state.startswith("OBSERVATION:")
        assert done and reward == 1.0
        assert client.close() == {"closed": client.env_id}
