"""The expert: searches hop by hop and answers with a gold answer only once a passage it retrieved
holds it. Its success rate is the data's answerability under the retriever in use.

For a generated question it follows the derivation (``hops``): it searches each hop's
sub-question, and goes on only when the hop's answer (the bridge entity, the nationality) is in the
passages it got back, so a later hop is only asked about an entity the earlier search found; when a
first hop's search misses it tries the whole question. A question without a derivation (a user's)
is searched as it is. When a hop cannot be completed it answers "unknown" (a wrong answer, not
terminal), and keeps doing so until the turn cap.
"""

from __future__ import annotations

from typing import Any

from agentgym_search.corpus import contains_answer
from agentgym_search.env import SearchEnv

GIVE_UP = "<answer>unknown</answer>"


class SearchExpert:
    def __init__(self, env: SearchEnv):
        self.env = env
        self._episode: tuple[int | None, int] | None = None
        self.plan: list[tuple[str, list[str]]] = []  # (hop answer, queries still to try)
        self.seen: list[str] = []  # every passage retrieved this episode
        self.hop_seen: list[str] = []  # those retrieved for the current hop

    def _start(self) -> None:
        q = self.env.question
        assert q is not None
        if q.hops:
            self.plan = [
                (
                    str(h["answer"]),
                    [str(h["question"])] + ([q.question] if i == 0 and len(q.hops) > 1 else []),
                )
                for i, h in enumerate(q.hops)
            ]
        else:
            self.plan = [(q.golden_answers[0], [q.question])]
        self.seen, self.hop_seen = [], []

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        env = self.env
        episode = (env.task_id, id(env.question))
        if env.num_steps == 0 or episode != self._episode:
            self._episode = episode
            self._start()
        elif env.last_hits and observation.startswith("<information>"):
            texts = [h.contents for h in env.last_hits]
            self.seen += texts
            self.hop_seen += texts
        while self.plan:
            answer, queries = self.plan[0]
            if any(contains_answer(text, answer) for text in self.hop_seen):
                self.plan.pop(0)
                self.hop_seen = []
                continue
            if not queries:
                return GIVE_UP
            return f"<search>{queries.pop(0)}</search>"
        assert env.question is not None
        for gold in env.question.golden_answers:
            if any(contains_answer(text, gold) for text in self.seen):
                return f"<answer>{gold}</answer>"
        return GIVE_UP
