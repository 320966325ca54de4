"""Our envs in TRL's ``GRPOTrainer`` (``trl`` 1.16): an ``environment_factory`` and its dataset.

>>> from agentgym.adapters.trl import environment_factory, task_dataset
>>> factory = environment_factory("babyai")               # or url="http://127.0.0.1:36001"
>>> trainer = GRPOTrainer(model, args=config, train_dataset=task_dataset("babyai", limit=64),
...                       processing_class=tool_tokenizer(model),
...                       environment_factory=factory)   # no reward_funcs: the env owns the reward

TRL's multi-turn support is tool calling: each rollout gets one instance from the factory, its
``reset(**row)`` is called with the dataset row (``task_id`` picks the task) and returns the text
appended to the prompt (the env's prompt and first observation), the model acts by calling the
instance's one tool, ``act(action)``, which steps the env and returns the next observation, and
``get_reward()`` scores the rollout with the episode's return. TRL logs it as
``rewards/<class>/mean``, the class being named for the env (``AgentGymBabyai``). Every scored
episode is kept in ``factory.episodes`` (task, actions, return, terminated, truncated).

What does not map:
- TRL has no "done": a rollout ends when the model stops calling tools (or at
  ``max_tool_calling_iterations``). After the episode ends, ``act`` steps nothing and says so.
  ``max_turns`` (the spec's ``default_max_turns`` unless given) ends it as truncated the same way.
- A reply with no tool call is not a format error turn as in our trainer: TRL ends the rollout.
- TRL turns an exception in a tool into an ``{"error": ...}`` result for the model, so an env or
  server failure is recorded and ``get_reward`` raises it: a failed episode is never scored 0.
- Per-step rewards are not seen by TRL; the episode's return is the one reward.
- TRL parses tool calls only for the chat templates it knows (Qwen, Llama 3, ...). A ChatML model
  it does not know (SmolLM2, our tiny model) gets Qwen2.5's template, ChatML with tool calls,
  from :func:`tool_tokenizer`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.adapters import EnvFailure, open_env, require, spec_of

#: What the model is told about acting, after the env's own prompt.
TOOL_NOTE = "Act by calling the tool `act` with exactly one action at a time."
OVER = "The episode is over: no more actions are taken."


@dataclass
class EpisodeRecord:
    """One scored rollout: what TRL's reward for it was computed from."""

    env: str
    task_id: int
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    episode_return: float = 0.0


class AgentGymToolEnv:
    """One TRL rollout's env: ``reset``, the tool ``act`` and ``get_reward``, as TRL expects."""

    env_name: str = ""
    url: str | None = None
    max_turns: int = 0
    prompt: str = ""
    env_kwargs: dict[str, Any] = {}

    def __init__(self, record: Callable[[EpisodeRecord], None]) -> None:
        self._env = open_env(self.env_name, url=self.url, **self.env_kwargs)
        self._record = record
        self._episode: EpisodeRecord | None = None
        self._failure: BaseException | None = None

    def reset(self, task_id: int | None = None, seed: int | None = None, **row: Any) -> str:
        """Start the row's task (``task_id``, else the one ``seed`` picks); the prompt text."""
        self._failure = None
        options = None if task_id is None else {"task_id": int(task_id)}
        observation, info = self._env.reset(seed=seed, options=options)
        self._episode = EpisodeRecord(self.env_name, int(info["task_id"]))
        prompt = self.prompt or str(info.get("instruction", ""))
        return f"{prompt}\n\n{TOOL_NOTE}\n\n{observation}".strip()

    def act(self, action: str) -> str:
        """Take one action in the environment.

        Args:
            action: The action to take, written as the environment's instructions say.

        Returns:
            What the environment shows after the action.
        """
        episode = self._episode
        if episode is None:
            raise EnvFailure("act() before reset()")
        if episode.terminated or episode.truncated:
            return OVER
        try:
            observation, reward, terminated, truncated, _ = self._env.step(action)
        except Exception as e:  # recorded first: TRL hands a tool's exception to the model as text
            self._failure = e
            raise
        episode.actions.append(action)
        episode.rewards.append(float(reward))
        episode.terminated = bool(terminated)
        episode.truncated = bool(truncated) or (not terminated and len(episode.actions) >= self.max_turns)
        if episode.terminated or episode.truncated:
            return f"{observation}\n\n{OVER}"
        return observation

    def get_reward(self) -> float:
        """The episode's return (the env's score); raises if the env failed during the rollout."""
        episode = self._episode
        if self._failure is not None:
            raise EnvFailure(f"{self.env_name} failed during the rollout: {self._failure}") from self._failure
        if episode is None:
            raise EnvFailure("get_reward() before reset()")
        episode.episode_return = float(self._env.score)
        self._record(episode)
        return episode.episode_return


class EnvironmentFactory:
    """A callable TRL calls for each env instance it needs; ``episodes`` holds every scored one."""

    def __init__(self, env: str, *, url: str | None = None, max_turns: int | None = None, **env_kwargs: Any):
        spec = spec_of(env, url=url, token=env_kwargs.get("token"))
        name = "AgentGym" + "".join(part.capitalize() for part in env.replace("-", "_").split("_"))
        attrs = {
            "env_name": env,
            "url": url,
            "max_turns": max_turns or spec.default_max_turns,
            "prompt": spec.prompt,
            "env_kwargs": dict(env_kwargs),
        }
        # a class per env: TRL logs an env-owned reward under its class name
        self.env_class: type[AgentGymToolEnv] = type(name, (AgentGymToolEnv,), attrs)
        self.episodes: list[EpisodeRecord] = []

    def __call__(self) -> AgentGymToolEnv:
        return self.env_class(self.episodes.append)


def environment_factory(
    env: str, *, url: str | None = None, max_turns: int | None = None, **env_kwargs: Any
) -> EnvironmentFactory:
    """The ``environment_factory`` for ``GRPOTrainer``: env ``env`` in-process, or served at ``url``."""
    return EnvironmentFactory(env, url=url, max_turns=max_turns, **env_kwargs)


def task_dataset(
    env: str, *, split: str = "train", tasks: Sequence[int] | None = None, limit: int | None = None
) -> Any:
    """A ``datasets.Dataset`` of the env's tasks for ``GRPOTrainer``: a ``task_id`` column (passed
    to ``reset``) and an empty user ``prompt`` that ``reset``'s text fills in."""
    datasets = require("datasets", "trl")
    from agentgym.plugins import get_env_spec

    spec = get_env_spec(env)
    if tasks is None:
        if split not in spec.splits:
            raise ValueError(f"{env} has no split {split!r} (splits: {', '.join(spec.splits)})")
        tasks = list(spec.splits[split].task_ids)
    ids = [int(t) for t in tasks][:limit]
    return datasets.Dataset.from_list(
        [{"prompt": [{"role": "user", "content": ""}], "task_id": t} for t in ids]
    )


def tool_tokenizer(model: Any) -> Any:
    """The tokenizer of ``model`` (a path, or a tokenizer) ready for TRL's tool calling: as it is
    where TRL knows its chat template, else, for a ChatML tokenizer, with Qwen2.5's template (ChatML
    with tool calls). Raises ValueError for other templates TRL cannot parse tool calls of."""
    require("trl", "trl")
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template

    tokenizer = AutoTokenizer.from_pretrained(model) if isinstance(model, str) else model
    try:
        return add_response_schema(tokenizer)
    except ValueError:
        if "<|im_start|>" not in tokenizer.get_vocab():
            raise
    tokenizer.chat_template = qwen2_5_chat_template
    return add_response_schema(tokenizer)
