"""The guess-the-number env: a complete, minimal ``TextEnv``."""

from __future__ import annotations

import re

from agentgym import TextEnv
from agentgym_guess.tasks import MAX_GUESSES, category_of, task

_GUESS = re.compile(r"^\s*guess\s+(-?\d+)\s*$", re.I)


class GuessEnv(TextEnv):
    def reset_task(self, task_id: int):
        self.high, self.target = task(task_id)
        self.guesses = 0
        # What the player has been told so far: the hidden number lies in [lo, hi].
        self.lo, self.hi = 1, self.high
        instruction = (
            f"Guess the hidden integer between 1 and {self.high}. "
            f"You have {MAX_GUESSES} guesses. Act with: guess <number>"
        )
        return f"I am thinking of a number between 1 and {self.high}.", {
            "instruction": instruction,
            "category": category_of(task_id),
        }

    def step_action(self, action: str):
        m = _GUESS.match(action)
        if m is None:
            return (
                f"Invalid action {action[:80]!r}. Valid actions: guess <number> (an integer from 1 to {self.high}).",
                0.0,
                False,
                False,
                {"valid_action": False},
            )
        n = int(m.group(1))
        if not 1 <= n <= self.high:
            return (
                f"{n} is outside 1..{self.high}. Guess again.",
                0.0,
                False,
                False,
                {"valid_action": False},
            )
        self.guesses += 1
        if n == self.target:
            return f"Correct! The number was {n}.", 1.0, True, False, {"success": True}
        hint = "higher" if n < self.target else "lower"
        if n < self.target:
            self.lo = max(self.lo, n + 1)
        else:
            self.hi = min(self.hi, n - 1)
        if self.guesses >= MAX_GUESSES:
            return f"Wrong: the number is {hint} than {n}. No guesses left.", 0.0, True, False, {}
        left = MAX_GUESSES - self.guesses
        return f"Wrong: the number is {hint} than {n}. {left} guesses left.", 0.0, False, False, {}

    def available_actions(self):
        return None  # open-ended: "guess <number>"
