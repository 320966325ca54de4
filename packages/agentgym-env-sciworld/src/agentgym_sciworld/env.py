"""``SciWorldEnv``: ScienceWorld tasks as a text environment, on the real simulator."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agentgym import TextEnv
from agentgym_sciworld.simulator import DEFAULT_JAVA_OPTIONS, Simulator, SimulatorError
from agentgym_sciworld.tasks import CATEGORY_OF, task_of

NO_MATCH = "No known action matches that input."
CHECK_ACTIONS = frozenset({"check valid actions", "check valid action", "check available actions"})

INSTRUCTION = """You are an agent in ScienceWorld, a simulated house with a kitchen, a workshop, a greenhouse, an \
outside area and more, where things heat up, melt, conduct electricity, grow and live. You are given a science task. \
Every round I give you an observation; you respond with your thought and one action.

Actions (OBJ and LOC are things and places as the observations name them):
- look around: describe the current room; look at OBJ, look in OBJ: describe a thing or its contents
- go to LOC: move to a room you can see an open door to; open OBJ, close OBJ: doors and containers
- pick up OBJ, put down OBJ, move OBJ to OBJ: carry things and put them in or on others
- pour OBJ in OBJ, dunk OBJ in OBJ, mix OBJ: liquids and mixtures
- activate OBJ, deactivate OBJ, use OBJ on OBJ: devices such as a stove, a thermometer or a battery
- connect OBJ to OBJ, disconnect OBJ: electrical circuits (terminals are named like "battery anode")
- eat OBJ, flush OBJ, read OBJ
- focus on OBJ: signals that OBJ is the object the task is about. Use it only as the task asks: focusing on the \
wrong object fails the task.
- wait, wait1: let 10 or 1 time steps pass
- inventory, task: what you carry; the task description again
- check valid actions: list the action templates and the objects you can refer to now
When the simulator asks which of several objects you mean, answer with its number.

Your response should use the following format:
Thought: <your thoughts>
Action: <your next action>"""

_SPACES = re.compile(r"\s+")


def normalize_action(action: str) -> str:
    """One line, single spaces, no surrounding blanks: what the simulator's parser reads."""
    return _SPACES.sub(" ", action).strip()


class SciWorldEnv(TextEnv):
    """One ScienceWorld task variation per task id, in a JVM of its own that lives as long as the env.

    ``step_limit``: turns after which the episode is truncated (default: none; the rollout's horizon
    truncates). ``step_timeout``: seconds a step may take before it is an error and the JVM is stopped.
    ``deterministic``: the same task id gives the same episode in any JVM (see ``simulator``); off,
    steps are ~20% faster but repeated loads in one JVM may list objects in another order.
    ``list_actions``: put every valid action in ``info["available_actions"]`` after each step (hundreds
    to thousands of strings, up to ~0.3 s per step); by default they come only with ``check valid
    actions``.
    """

    #: ``sim``, the instance's own JVM (its process, its gateway), kept for the env's whole life:
    #: it legitimately differs between two instances (the kit's check of instance state). What the
    #: JVM holds of an episode is reset by loading the task, and the episode checks compare it.
    persistent_attributes = ("sim",)

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        step_limit: int | None = None,
        step_timeout: float = 60.0,
        load_timeout: float = 300.0,
        list_actions: bool = False,
        deterministic: bool = True,
        java_options: Sequence[str] = DEFAULT_JAVA_OPTIONS,
    ):
        super().__init__(render_mode=render_mode)
        self.step_limit = step_limit
        self.step_timeout = step_timeout
        self.load_timeout = load_timeout
        self.list_actions = list_actions
        self.java_options = tuple(java_options)
        self.deterministic = deterministic
        self.sim = self._start()
        self.task_name = ""
        self.variation = 0
        self.category = ""
        self.goal = ""
        self.raw_score = 0  # the simulator's score now, -100..100
        self.raw_change = 0  # the simulator's own reward for the last step: its change of score
        self.first_look = ""  # what "look around" showed at reset (the observation without the goal)
        self.history: list[str] = []  # actions sent to the simulator this episode
        self._gold: list[str] | None = None

    def _start(self) -> Simulator:
        return Simulator(java_options=self.java_options, deterministic=self.deterministic)

    def _simulator(self) -> Simulator:
        # One JVM for the env's whole life; only a JVM that died (or timed out) is replaced, at reset.
        if not self.sim.alive:
            self.sim.close()
            self.sim = self._start()
        return self.sim

    def reset_task(self, task_id: int) -> tuple[str, dict[str, Any]]:
        task, variation = task_of(task_id)
        sim = self._simulator()
        sim.load(task.name, variation, timeout=self.load_timeout)
        self.task_name, self.variation = task.name, variation
        self.category = CATEGORY_OF[task.name]
        self.goal = sim.task_description()
        self.history, self._gold = [], None
        look, score, _ = sim.act("look around", self.step_timeout)
        # Some variations start with points already earned (the agent starts where the task wants it):
        # the simulator counts them from the first look. They are paid with the first action the
        # simulator accepts, so that step rewards always sum to the final score.
        self.raw_score = self.raw_change = int(round(100 * score))
        self.first_look = look
        return f"{self.goal}\n\n{look}", {
            "instruction": INSTRUCTION,
            "goal": self.goal,
            "task_name": task.name,
            "variation": variation,
            "category": self.category,
            "raw_score": self.raw_score,
        }

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.raw_change = 0  # an action that never reaches the simulator changes no score
        return super().step(action)

    def step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        text = normalize_action(action)
        if text.lower() in CHECK_ACTIONS:
            return self._check_actions()
        observation, score, completed = self.sim.act(text, self.step_timeout)
        self.history.append(text)
        valid = observation.strip() != NO_MATCH
        raw = int(round(100 * score))
        self.raw_change, self.raw_score = raw - self.raw_score, raw
        # Rewards are increments of the score clipped to 0..100, scaled to 0..1: they sum to the final
        # score (exactly 1.0 when solved), and a failure (the simulator's -100) brings the return back
        # to 0, not below. An action the simulator did not understand changes nothing and earns nothing.
        reward = self.reward_to(max(raw, 0) / 100) if valid else 0.0
        failed = raw < 0
        success = raw >= 100
        terminated = bool(completed or failed or success)
        truncated = not terminated and self.step_limit is not None and self.num_steps >= self.step_limit
        if not valid:
            observation = f"{observation} Type `check valid actions` to list the actions you can take here."
        info: dict[str, Any] = {
            "raw_score": raw,
            "success": success,
            "valid_action": valid,
            "category": self.category,
        }
        if failed:
            info["failed"] = True
        if self.list_actions:
            info["available_actions"] = self.sim.valid_actions(self.step_timeout)
        return observation, reward, terminated, truncated, info

    def _check_actions(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Templates and objects in the observation (a few dozen strings); every valid combination of
        them in ``info["available_actions"]``. The simulator's clock does not move."""
        templates = self.sim.action_templates(self.step_timeout)
        objects = self.sim.objects(self.step_timeout)
        observation = (
            f"Valid action templates (OBJ and LOC stand for a thing or place): {', '.join(templates)}\n"
            f"Things you can refer to now: {', '.join(objects)}"
        )
        return (
            observation,
            0.0,
            False,
            False,
            {
                "raw_score": self.raw_score,
                "category": self.category,
                "action_templates": templates,
                "objects": objects,
                "available_actions": self.sim.valid_actions(self.step_timeout),
            },
        )

    def gold_path(self) -> list[str]:
        """The simulator's gold action sequence for this episode's task.

        Generating it costs up to seconds, so tasks load without it; the first call reloads the task
        with it and replays this episode's actions so far (the simulator is deterministic: the world
        comes back exactly as it was)."""
        if self._gold is None:
            sim = self.sim
            sim.load(self.task_name, self.variation, gold_path=True, timeout=self.load_timeout)
            self._gold = sim.gold_path()
            sim.act("look around", self.step_timeout)
            for action in self.history:
                sim.act(action, self.step_timeout)
        return list(self._gold)

    @property
    def jvm_pid(self) -> int:
        """Process id of this env's JVM."""
        return self.sim.pid

    def close(self) -> None:
        try:
            self.sim.close()
        except SimulatorError:
            pass
