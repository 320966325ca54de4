"""``RemoteEnv``: one session on an ``agentgym serve`` server, with the interface of an in-process env."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym

from agentgym.client.retry import SEND, replaying, retrying, run
from agentgym.client.transport import raise_for, send, sync_client
from agentgym.errors import AgentGymError, EpisodeOverError, UnknownSessionError
from agentgym.spaces import action_space, observation_space


class RemoteEnv(gym.Env[str, str]):
    """One session on a remote server, with the interface of an in-process ``TextEnv``.

    Requests are retried by the shared policy (``client/retry.py``); a session the server lost is
    re-created and its episode replayed (``replay_diverged`` is raised if the replay ends elsewhere).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        url: str,
        env: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.25,
    ):
        self.url, self.env_name = url.rstrip("/"), env
        self.retries, self.backoff = retries, backoff
        self.client = sync_client(self.url, token=token, timeout=timeout)
        self.observation_space, self.action_space = observation_space(), action_space()
        self.session_id: int | None = None
        self.task_id: int | None = None
        self._seed: int | None = None
        self.actions: list[str] = []
        self.last_observation = ""
        self.score = 0.0

    def _request(self, method: str, path: str, **kw: Any) -> Any:
        def do(command: Any) -> Any:
            if command is SEND:
                return send(self.client, method, path, **kw)
            time.sleep(command.seconds)

        return raise_for(run(retrying(method, self.url, self.retries, self.backoff), do))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        task_id = (options or {}).get("task_id")
        self._seed = seed
        if self.session_id is None:
            result = self._create(task_id, seed)
        else:
            try:
                result = self._request(
                    "POST", f"/v1/sessions/{self.session_id}/reset", json={"task_id": task_id, "seed": seed}
                )
            except UnknownSessionError:
                result = self._create(task_id, seed)
        self.task_id = result["info"].get("task_id", task_id)
        self.actions, self.score = [], 0.0
        self.last_observation = result["observation"]
        return result["observation"], result["info"]

    def _create(self, task_id: int | None, seed: int | None) -> dict:
        result = self._request(
            "POST", "/v1/sessions", json={"env": self.env_name, "task_id": task_id, "seed": seed}
        )
        self.session_id = result["session_id"]
        return result

    def _step(self, action: str) -> dict:
        return self._request("POST", f"/v1/sessions/{self.session_id}/step", json={"action": action})

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.session_id is None:
            raise EpisodeOverError("call reset() before step()")
        try:
            r = self._step(action)
        except UnknownSessionError:
            self._restore()
            r = self._step(action)
        self.actions.append(action)
        self.score, self.last_observation = r["score"], r["observation"]
        return r["observation"], r["reward"], r["terminated"], r["truncated"], r["info"]

    def _restore(self) -> None:
        """The server lost the session: re-create it and replay the episode's actions."""
        observation = self._create(self.task_id, self._seed)["observation"]
        run(replaying(self.actions, self.last_observation, observation), self._step)

    def expert_action(self) -> str:
        return self._request("GET", f"/v1/sessions/{self.session_id}/expert")["action"]

    def render_png(self) -> bytes:
        return self._request("GET", f"/v1/sessions/{self.session_id}/render").content

    def render(self) -> str:
        return self.last_observation

    def specs(self) -> list[dict]:
        return self._request("GET", "/v1/envs")["envs"]

    def close(self) -> None:
        if self.session_id is not None:
            try:
                self._request("DELETE", f"/v1/sessions/{self.session_id}")
            except AgentGymError:
                pass  # already gone: closing is best effort
            self.session_id = None
        self.client.close()
