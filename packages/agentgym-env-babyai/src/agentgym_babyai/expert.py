"""The expert: minigrid's ``BabyAIBot`` plans; its primitive actions are spoken as text actions.

Each bot action has a text action that compiles to exactly that primitive (``turn left``,
``move forward``, ``pickup <the object in front> k``, ``drop``, ``toggle``), so the expert acts
through the same interface as any agent, one primitive per turn.
"""

from __future__ import annotations

from typing import Any

from agentgym_babyai.scene import DONE, DROP, FORWARD, LEFT, PICKUP, RIGHT, TOGGLE

_TEXT = {LEFT: "turn left", RIGHT: "turn right", FORWARD: "move forward", DROP: "drop", TOGGLE: "toggle"}


class BotExpert:
    def __init__(self, env: Any):
        self.env = env
        self.bot: Any = None
        self.mission: Any = None

    def __call__(self, observation: str, info: dict) -> str:
        from minigrid.utils.baby_ai_bot import BabyAIBot

        env = self.env
        # A new episode (nothing done yet, or another level): plan afresh. The bot assumes that its
        # previous suggestion was taken, which holds while the expert drives the episode.
        if self.bot is None or env.num_steps == 0 or self.mission is not env.mini:
            self.bot, self.mission = BabyAIBot(env.mini), env.mini
        action = int(self.bot.replan())
        if action == PICKUP:
            label = env.scene.label_at(env.scene.front_pos)
            return f"pickup {label}" if label else "check available actions"
        if action == DONE:
            return "check available actions"
        return _TEXT[action]
