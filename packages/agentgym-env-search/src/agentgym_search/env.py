"""``SearchEnv``: answer a question by searching a corpus (Search-R1's actions and reward)."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from agentgym_search.corpus import normalize_answer
from agentgym_search.data import Question, SearchData, configured_data
from agentgym_search.retrievers import Batcher, Hit, shared_retriever

from agentgym import TextEnv
from agentgym.errors import UnknownTaskError
from agentgym.parsers import parse_tags

DEFAULT_TOPK = 3
INSTRUCTION = """Answer the question. Think step by step. When you lack some knowledge, search a \
Wikipedia index with <search> query </search>: the top results come back between <information> and \
</information>. Search as often as you need. When you know the answer, give it inside <answer> and \
</answer>, as a short phrase without explanation, for example <answer> Beijing </answer>."""

_TAG = re.compile(r"^<(search|answer)>(.*)</\1>$", re.S)


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in golds))


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """SQuAD's token F1 against the best gold answer."""
    best = 0.0
    pred = normalize_answer(prediction).split()
    for gold in golds:
        ref = normalize_answer(gold).split()
        common = sum((Counter(pred) & Counter(ref)).values())
        if common:
            precision, recall = common / len(pred), common / len(ref)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def format_hits(hits: Sequence[Hit]) -> str:
    if not hits:
        return "<information>No passage matches the query. Try other words.</information>"
    docs = "\n".join(f"Doc {i}(Title: {h.title}) {h.text}" for i, h in enumerate(hits, 1))
    return f"<information>{docs}</information>"


class SearchEnv(TextEnv):
    """One question per task; ``<search>`` returns the top-k passages, ``<answer>`` is scored.

    Options: ``retriever`` (a name: ``bm25``, ``dense``, ``http``, a plugin's; default
    ``$AGENTGYM_SEARCH_RETRIEVER`` or ``bm25``), ``retriever_options`` (passed to its factory;
    ``url`` and ``model`` default to ``$AGENTGYM_SEARCH_RETRIEVER_URL`` / ``$AGENTGYM_SEARCH_MODEL``),
    ``topk`` (3), ``scoring`` (``em``: reward 1 for an exact match after SQuAD normalisation;
    ``f1``: the answer's token F1, the episode's return being the best so far), ``end_on_answer``
    (``False``, as the reference: a wrong answer is not terminal), and the data (``corpus``,
    ``test``, ``train``, ``data``: see ``agentgym_search.data``)."""

    #: The process's shared retriever, looked up on the first search and kept: a handle to an index
    #: (or a retrieval server), the same for every episode, that a fresh instance lacks until it
    #: searches (the kit's check of instance state after reset).
    persistent_attributes = ("_retriever",)

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        retriever: str | None = None,
        retriever_options: dict[str, Any] | None = None,
        topk: int | None = None,
        scoring: str = "em",
        end_on_answer: bool = False,
        corpus: str | None = None,
        test: str | Sequence[str] | None = None,
        train: str | Sequence[str] | None = None,
        data: str | SearchData | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if scoring not in ("em", "f1"):
            raise ValueError(f"scoring must be 'em' or 'f1', got {scoring!r}")
        self.data = data if isinstance(data, SearchData) else configured_data(corpus, test, train, data)
        self.retriever_name = retriever or os.environ.get("AGENTGYM_SEARCH_RETRIEVER", "").strip() or "bm25"
        options = dict(retriever_options or {})
        if self.retriever_name == "http":
            options.setdefault("url", os.environ.get("AGENTGYM_SEARCH_RETRIEVER_URL", ""))
        if self.retriever_name == "dense":
            options.setdefault("model", os.environ.get("AGENTGYM_SEARCH_MODEL", ""))
        self.retriever_options = options
        self.topk = int(topk or os.environ.get("AGENTGYM_SEARCH_TOPK") or DEFAULT_TOPK)
        self.scoring = scoring
        self.end_on_answer = end_on_answer
        self.question: Question | None = None
        self.category = ""
        self.searches: list[str] = []
        self.last_hits: list[Hit] = []
        self._retriever: Batcher | None = None

    @property
    def retriever(self) -> Batcher:
        """The process's shared retriever, built (or its index loaded) on first use."""
        if self._retriever is None:
            self._retriever = shared_retriever(
                self.retriever_name, self.data.key, self.data.load_corpus, **self.retriever_options
            )
        return self._retriever

    def check_task_id(self, task_id: int) -> None:
        """Ids index this env's questions (test, then train), which its options may choose apart
        from the spec's: any other id is refused, never wrapped onto another question."""
        if task_id >= len(self.data.all_questions):
            splits = {s: [t for ids in c.values() for t in ids] for s, c in self.data.categories().items()}
            raise UnknownTaskError.among(task_id, "search", splits)

    def reset_task(self, task_id: int) -> tuple[str, dict[str, Any]]:
        self.question = self.data.all_questions[task_id]
        self.category = self.question.dataset or "default"
        self.searches, self.last_hits = [], []
        return f"Question: {self.question.question}", {
            "instruction": INSTRUCTION,
            "question": self.question.question,
            "category": self.category,
        }

    def step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self.question is not None
        m = _TAG.match(action) or _TAG.match(parse_tags(action).action or "")
        if m is None:
            return (
                "Invalid action: neither a <search> nor an <answer> tag. Search with "
                "<search> query </search>, or give your final answer as <answer> answer </answer>.",
                0.0,
                False,
                False,
                {"valid_action": False, "category": self.category},
            )
        tag, content = m.group(1), " ".join(m.group(2).split())
        if tag == "search":
            self.searches.append(content)
            self.last_hits = self.retriever.search(content, self.topk)
            return format_hits(self.last_hits), 0.0, False, False, {"category": self.category}
        em = exact_match(content, self.question.golden_answers)
        f1 = token_f1(content, self.question.golden_answers)
        score = em if self.scoring == "em" else f1
        best = max(self.score, score)
        done = em == 1.0 or self.end_on_answer
        info = {"success": em == 1.0, "em": em, "f1": f1, "answer": content, "category": self.category}
        if em == 1.0:
            text = "Your answer is correct."
        elif done:
            text = f"Your answer is wrong. The answer was: {self.question.golden_answers[0]}."
        else:
            text = "Your answer is wrong. Search more, or answer again."
        return text, self.reward_to(best) if best > self.score else 0.0, done, False, info
