"""``BabyAIEnv``: BabyAI levels as a text environment with macro actions."""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

import minigrid  # noqa: F401  (registers the BabyAI-* ids with Gymnasium)
import minigrid.core.mission
import minigrid.envs.babyai.core.roomgrid_level

from agentgym import TextEnv
from agentgym_babyai.levelgen import load_level, make_level, save_level
from agentgym_babyai.levels import MINIGRID_IDS, level_of, seed_of, short_name
from agentgym_babyai.scene import Scene


def _silent(*args: Any, **kwargs: Any) -> None:
    return None


# Level generation prints "Sampling rejected: ..." to stdout on every rejected layout; an env must
# not write to stdout (it corrupts `agentgym play`, logs and piped output). Shadowing `print` in
# those two modules silences exactly that, thread-safely and for free.
minigrid.envs.babyai.core.roomgrid_level.print = _silent  # type: ignore[attr-defined]
minigrid.core.mission.print = _silent  # type: ignore[attr-defined]


def _no_image() -> None:
    return None


_SPACES = re.compile(r"\s+")

INSTRUCTION = """You are an exploration master that wants to finish every goal you are given. Every round I will give \
you an observation, and you have to respond an action and your thought based on the observation to finish the given \
task. You are placed in a room and you need to accomplish the given goal with actions.

You can use the following actions:
- turn right
- turn left
- move forward
- go to <obj> <id>
- pickup <obj> <id>
- go through <door> <id>: <door> must be an open door.
- toggle and go through <door> <id>: <door> can be a closed door or a locked door. If you want to open a locked door, \
you need to carry a key that is of the same color as the locked door.
- toggle: there is a closed or locked door right in front of you and you can toggle it.
- drop: drop the object you are carrying in front of you.
- check available actions

Your response should use the following format:
Thought: <your thoughts>
Action: <your next action>"""


def normalize_action(action: str) -> str:
    """Lower case, single spaces, no trailing period; ``pick up`` is accepted for ``pickup``."""
    a = _SPACES.sub(" ", action.strip().lower()).rstrip(".")
    if a.startswith("pick up "):
        a = "pickup " + a[len("pick up ") :]
    return a


#: minigrid envs one instance keeps for the levels it played last: making one costs a fraction of a
#: reset (levelgen.make_level skips gym.make; with it, 0.66 ms against 0.33 ms), so one is enough
MAX_CACHED_LEVELS = 1


#: First lines an observation may carry before the scene, saying what the last action did rather
#: than where the agent is (an invalid action; a listing of the actions).
NOT_STATE = ("Invalid action ", "You can take the following actions:")


def state_key(observation: str, info: dict[str, Any]) -> str | None:
    """The state an observation shows (GiGPO's anchor, ``EnvSpec.state_key``): the scene, without
    the line an invalid action or a listing of the actions puts before it, so that the same state
    reads the same whatever the last action was; None (the text itself) otherwise."""
    first, sep, rest = observation.partition("\n")
    return rest if sep and first.startswith(NOT_STATE) else None


class BabyAIEnv(TextEnv):
    """One BabyAI level at a time; the task id picks the level and the seed."""

    def __init__(self, render_mode: str | None = None, tile_size: int = 16):
        super().__init__(render_mode=render_mode)
        self.tile_size = tile_size
        # level id -> its minigrid env (re-seeded on every reset), the most recently used few only: a
        # server reuses an instance for any task, and holding all 40 levels' envs in every instance
        # grew a churning server's memory without bound in practice (tests/reliability/test_soak.py)
        self._levels: OrderedDict[str, Any] = OrderedDict()
        self.mini: Any = None
        self.scene: Scene | None = None
        self.goal = ""

    def _level_env(self, level: str) -> Any:
        env = self._levels.get(level)
        if env is not None:
            self._levels.move_to_end(level)
        else:
            env = self._keep_level(level, make_level(MINIGRID_IDS.get(level, level)))
            # minigrid builds its image observation after every primitive step (a sliced, rotated
            # copy of the grid); we describe the grid ourselves and never read that image, and it
            # cost half of each step. The rendered frame and the bot's view do not use it.
            env.gen_obs = _no_image
        return env

    def _keep_level(self, level: str, env: Any) -> Any:
        """``env`` as this instance's env of ``level`` (the one it replaces, and the least recently
        used beyond ``MAX_CACHED_LEVELS``, closed)."""
        old = self._levels.pop(level, None)
        if old is not None and old is not env:
            old.close()
        while len(self._levels) >= MAX_CACHED_LEVELS:
            self._levels.popitem(last=False)[1].close()
        self._levels[level] = env
        return env

    def reset_task(self, task_id: int) -> tuple[str, dict[str, Any]]:
        level, seed = level_of(task_id), seed_of(task_id)
        self.mini = self._level_env(level)
        self.mini.reset(seed=seed)
        # minigrid's own wording. (The reference rewrote "then" and "after you" to "and", which
        # loses the order that sequenced missions and the *Debug levels require.)
        self.goal = self.mini.mission
        self.scene = Scene(self.mini)
        observation = f"Your goal: {self.goal}\n{self.scene.describe()}\n{self.scene.action_list()}"
        return observation, {
            "instruction": INSTRUCTION,
            "goal": self.goal,
            "level": short_name(level),
            "seed": seed,
            "available_actions": list(self.scene.names),
        }

    def save_reset(self, observation: str, info: dict[str, Any]) -> Any:
        return save_level(self.mini, (self.goal, observation, info))

    def load_reset(self, saved: Any) -> tuple[str, dict[str, Any]]:
        mini, (self.goal, observation, info) = load_level(saved)
        # the copy is this instance's env of its level from now on (TextEnv.reset set task_id)
        self.mini = self._keep_level(level_of(self.task_id), mini)
        self.scene = Scene(self.mini)
        return observation, info

    def available_actions(self) -> list[str] | None:
        return list(self.scene.names) if self.scene is not None else None

    def step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        scene = self.scene
        assert scene is not None
        name = normalize_action(action)
        if name == "check available actions" or name == "check available action":
            listing = ", ".join(scene.names)
            return (
                f"You can take the following actions: {listing}\n{scene.describe()}\n{scene.action_list()}",
                0.0,
                False,
                False,
                {"primitive_steps": 0},
            )
        primitives = scene.primitives(name)
        if primitives is None:
            reason = scene.reasons.get(name) or self._unknown_reason(name)
            return (
                f"Invalid action {action.strip()[:200]!r}: {reason}\n{scene.describe()}\n{scene.action_list()}",
                0.0,
                False,
                False,
                {"valid_action": False},
            )
        reward, terminated, truncated, done_steps = 0.0, False, False, 0
        for primitive in primitives:
            _, r, terminated, truncated, _ = self.mini.step(primitive)
            reward += float(r)
            done_steps += 1
            if terminated or truncated:
                break
        self.scene = scene = Scene(self.mini)
        text = f"{scene.describe()}\n{scene.action_list()}"
        success = bool(terminated and reward > 0)
        if success:
            text = "The task is completed. " + text
        elif terminated:
            text = "The task has failed. " + text
        elif truncated:
            text = "The step limit is reached. " + text
        return (
            text,
            reward,
            bool(terminated),
            bool(truncated),
            {"success": success, "primitive_steps": done_steps, "available_actions": list(scene.names)},
        )

    def invalid_action_observation(self, action: Any, reason: str) -> str:
        # The base class's rejections (an empty action) read like this env's own invalid actions.
        if self.scene is None:
            return super().invalid_action_observation(action, reason)
        return f"{reason}\n{self.scene.describe()}\n{self.scene.action_list()}"

    @staticmethod
    def _unknown_reason(name: str) -> str:
        for verb in ("toggle and go through ", "go through ", "go to ", "pickup "):
            if name.startswith(verb):
                return f"there is no {name[len(verb) :]} in view."
        return "the action is not recognized. Please check the available actions."

    def render(self) -> Any:
        if self.render_mode == "rgb_array" and self.mini is not None:
            return self.mini.get_frame(highlight=True, tile_size=self.tile_size)
        return super().render()

    def close(self) -> None:
        for env in self._levels.values():
            env.close()
        self._levels.clear()
