"""Our envs as SkyRL-gym text envs: ``skyrl_gym.make("agentgym/<name>", extras={"task_id": N})``.

:func:`register` adds an ``agentgym/<name>`` id to skyrl_gym's registry for every installed env (or
every env an ``agentgym serve`` server at ``url`` serves); ``skyrl_gym.make`` then builds an
:class:`AgentGymTextEnv` (a ``skyrl_gym.envs.base_text_env.BaseTextEnv``) over one AgentGym env,
in-process or a session on that server. skyrl_gym is imported only when a function here (or the
class) is used; it installs with ``pip install 'agentgym-core[skyrl]'``.

The constructor takes SkyRL's ``(env_config, extras)``: ``extras`` is the dataset row less its
prompt and env class (``task_id``, ``seed``, ``max_turns``; also read under ``extra_info``),
``env_config`` SkyRL's config of the env class (``url``, ``token``, ``max_turns``, ``format_hint``).
SkyRL-train's generator puts its ``generator.max_turns`` into every env's ``extras``: under it,
that setting is the turn cap (set it to the env's ``default_max_turns``).

How it maps: ``init(prompt)`` resets the env to the task and returns our own opening turns (the
system prompt of :func:`agentgym.prompting.system_prompt`, then the first observation);
``step(reply)`` reads the reply with the env's action parser and steps the env with the action.
A reply that does not parse gets our format-error turn, reward 0, and the episode goes on (the
env is not stepped); an action the env rejects is its observation, reward 0. ``done`` is
``terminated or truncated`` or the turn cap (``max_turns``: the extras', else the spec's
``default_max_turns``); ``metadata`` keeps ``terminated``, ``truncated`` and ``turn_limit`` apart.
The reward of a step is the env's. An env or server failure raises (never a reward of 0).

What does not map:

- ``init``'s ``prompt`` is not shown to the model: an AgentGym task's opening turns come from its
  reset, so a dataset row's prompt is a placeholder (:func:`dataset_rows` writes one);
- the last observation is not a message (SkyRL sends none once ``done``): it is in
  ``metadata["observation"]``;
- ``postprocessed_action`` is always ``None``: the model's reply is kept as it was sampled;
- SkyRL's tool groups are not used: an AgentGym env's actions are text, read by its parser;
- AgentGym's per-episode reflections and the rollout's ``match_actions`` fallback have no SkyRL
  counterpart; ``format_hint`` does (``env_config``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from agentgym.adapters import open_env, require, spec_of
from agentgym.errors import EpisodeOverError
from agentgym.parsers import get_parser
from agentgym.prompting import format_error_observation, observation_turn, opening_messages

#: Prefix of the ids :func:`register` gives our envs in skyrl_gym's registry.
PREFIX = "agentgym/"
#: The entry point registered: a string, so that skyrl_gym's ``EnvSpec.to_json`` accepts it.
ENTRY_POINT = "agentgym.adapters.skyrl:AgentGymTextEnv"

_CLASS: type | None = None


def env_id(name: str) -> str:
    """The skyrl_gym id of env ``name``."""
    return f"{PREFIX}{name}"


def _setting(key: str, *sources: Any) -> Any:
    """The first value of ``key`` found in ``sources`` (mappings, OmegaConf configs or ``None``)."""
    for source in sources:
        if source is None:
            continue
        value = source.get(key)
        if value is not None:
            return value
    return None


class _TextEnvMixin:
    """The behaviour of :class:`AgentGymTextEnv`, kept free of skyrl_gym so that importing this
    module needs no skyrl_gym; :func:`env_class` mixes it into ``BaseTextEnv``."""

    turns: int
    max_turns: int
    _Output: Any  # skyrl_gym's BaseTextEnvStepOutput, set by env_class()

    def __init__(
        self,
        env_config: Mapping[str, Any] | None = None,
        extras: Mapping[str, Any] | None = None,
        *,
        env: str,
        url: str | None = None,
        token: str | None = None,
        max_turns: int | None = None,
        format_hint: bool = False,
    ) -> None:
        super().__init__()  # BaseTextEnv: turns, max_turns, tool groups
        extras = dict(extras or {})
        row = (extras, extras.get("extra_info"))
        self.url = _setting("url", env_config) or url
        token = _setting("token", env_config) or token
        self.env = open_env(env, url=self.url, **({"token": token} if self.url and token else {}))
        try:
            self.agentgym_spec = spec_of(env, url=self.url, remote=self.env)
        except BaseException:
            self.env.close()
            raise
        cap = _setting("max_turns", *row, env_config) or max_turns
        self.max_turns = int(cap or self.agentgym_spec.default_max_turns)
        self.format_hint = bool(_setting("format_hint", env_config) or format_hint)
        self.task_id = _setting("task_id", *row)
        self.seed = _setting("seed", *row)
        self._start_episode()

    def _start_episode(self) -> None:
        self.turns = 0
        self.rewards: list[float] = []
        self.format_errors = self.invalid_actions = 0
        self.success = self.done = False

    def init(self, prompt: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Reset the env to the row's task; the model's opening turns (``prompt``, a placeholder,
        is replaced) and the reset's info."""
        self._start_episode()
        options = {"task_id": int(self.task_id)} if self.task_id is not None else None
        seed = int(self.seed) if self.seed is not None else None
        observation, info = self.env.reset(seed=seed, options=options)
        self.task_id = info.get("task_id", self.task_id)
        messages = opening_messages(self.agentgym_spec, info, observation, format_hint=self.format_hint)
        return messages, {**info, "observation": observation}

    def step(self, action: str) -> Any:
        """One reply of the model: its action stepped in the env, or the parser's format error."""
        if self.done:
            raise EpisodeOverError("the episode has ended; call init() to start a new one")
        self.turns += 1
        parsed = get_parser(self.agentgym_spec.action_parser)(action)
        if parsed.action is None:
            # as in AgentGym's rollout: the env is not stepped, the error is the next user turn
            self.format_errors += 1
            error = format_error_observation(parsed.error)
            info = {"format_error": True, "valid_action": False}
            return self._output(error, error, 0.0, False, False, info, None)
        # an env or server failure raises from here: SkyRL must not train on a made-up reward of 0
        observation, reward, terminated, truncated, info = self.env.step(parsed.action)
        if info.get("valid_action") is False:
            self.invalid_actions += 1
        self.success = bool(info.get("success"))
        content = observation_turn(
            self.agentgym_spec.action_parser, observation, format_hint=self.format_hint
        )
        return self._output(content, observation, float(reward), terminated, truncated, info, parsed.action)

    def _output(
        self,
        content: str,
        observation: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
        action: str | None,
    ) -> Any:
        """The step's ``BaseTextEnvStepOutput``: no next user turn once the episode is done."""
        self.rewards.append(reward)
        ended = bool(terminated or truncated)
        turn_limit = not ended and self.turns >= self.max_turns
        self.done = ended or turn_limit
        metadata = {
            "action": action,
            "observation": observation,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "turn_limit": turn_limit,
            "format_error": action is None,
            "valid_action": bool(info.get("valid_action", True)),
            "success": bool(info.get("success", False)),
            "return": math.fsum(self.rewards),
            "info": info,
        }
        observations = [] if self.done else [{"role": "user", "content": content}]
        return self._Output(
            observations=observations,
            reward=reward,
            done=self.done,
            metadata=metadata,
            postprocessed_action=None,
        )

    def get_metrics(self) -> dict[str, Any]:
        """The episode's figures (numbers, so SkyRL's default aggregation averages them)."""
        return {
            "turns": self.turns,
            "return": math.fsum(self.rewards),
            "success": float(self.success),
            "format_errors": self.format_errors,
            "invalid_actions": self.invalid_actions,
        }

    def close(self) -> None:
        self.env.close()


def env_class() -> type:
    """``AgentGymTextEnv``: built on first use, as a subclass of skyrl_gym's ``BaseTextEnv``."""
    global _CLASS
    if _CLASS is None:
        require("skyrl_gym", "skyrl")
        from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

        _CLASS = type(
            "AgentGymTextEnv",
            (_TextEnvMixin, BaseTextEnv),
            {
                "__module__": __name__,
                "__doc__": "One AgentGym env (in-process or served) as a SkyRL-gym text env.",
                "_Output": BaseTextEnvStepOutput,
            },
        )
    return _CLASS


def __getattr__(name: str) -> Any:
    # the class exists only once skyrl_gym is importable; the registered entry point and pickle
    # both find it by this name
    if name == "AgentGymTextEnv":
        return env_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def served_envs(url: str, token: str | None = None) -> list[str]:
    """The names of the envs the ``agentgym serve`` server at ``url`` serves."""
    from agentgym.client import RemoteEnv

    client = RemoteEnv(url, "", token=token)
    try:
        return sorted(spec["name"] for spec in client.specs())
    finally:
        client.close()


def register(names: Iterable[str] | None = None, url: str | None = None, **options: Any) -> list[str]:
    """Register ``agentgym/<name>`` in skyrl_gym's registry for each env of ``names`` (default:
    every installed env, or with ``url`` every env that server serves); returns the ids.

    ``options`` (``token``, ``max_turns``, ``format_hint``) go to every env made. Idempotent: an id
    registered here before is registered again with the latest ``url`` and ``options``; an id
    someone else registered is an error (skyrl_gym's ``RegistrationError``)."""
    require("skyrl_gym", "skyrl")
    from skyrl_gym import error
    from skyrl_gym.envs import registration

    if names is None:
        if url:
            names = served_envs(url, options.get("token"))
        else:
            import agentgym

            names = sorted(agentgym.env_specs())
    ids = []
    for name in names:
        id_ = env_id(name)
        held = registration.registry.get(id_)
        if held is not None:
            if held.entry_point != ENTRY_POINT:
                raise error.RegistrationError(f"{id_} is already registered by {held.entry_point!r}")
            registration.deregister(id_)
        registration.register(id=id_, entry_point=ENTRY_POINT, kwargs={"env": name, "url": url, **options})
        ids.append(id_)
    return ids


def dataset_rows(name: str, split: str = "train", limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of a SkyRL prompt dataset over a split of env ``name``: its ``env_class``, a
    placeholder ``prompt`` (``init`` writes the real one) and the ``task_id``, which SkyRL hands
    the env in ``extras``."""
    from agentgym.plugins import get_env_spec

    ids = get_env_spec(name).splits[split].task_ids
    ids = ids[:limit] if limit is not None else ids
    return [
        {
            "data_source": env_id(name),
            "env_class": env_id(name),
            "prompt": [{"role": "user", "content": f"{name} task {t}"}],
            "task_id": int(t),
            "split": split,
        }
        for t in ids
    ]
