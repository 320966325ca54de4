"""Retrieval figures: recall@k of a passage that holds a gold answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_search.corpus import contains_answer
from agentgym_search.data import Question
from agentgym_search.retrievers import Batcher


def retrieval_recall(questions: Sequence[Question], retriever: Batcher, k: int) -> dict[str, dict[str, Any]]:
    """Per category (and ``all``): ``n``; ``question``, the share of questions whose top-k for the
    question itself holds a passage with a gold answer; ``hops``, for questions with a derivation,
    the share whose every hop's top-k (the hop's sub-question) holds that hop's answer (else None)."""
    hits = retriever.search_many([q.question for q in questions], k)
    hop_queries = [(i, str(h["question"]), str(h["answer"])) for i, q in enumerate(questions) for h in q.hops]
    hop_hits = retriever.search_many([q for _, q, _ in hop_queries], k) if hop_queries else []
    hop_ok = [True] * len(questions)
    for (i, _, answer), found in zip(hop_queries, hop_hits, strict=True):
        if not any(contains_answer(h.contents, answer) for h in found):
            hop_ok[i] = False
    table: dict[str, dict[str, list]] = {}
    for i, q in enumerate(questions):
        ok = any(contains_answer(h.contents, a) for h in hits[i] for a in q.golden_answers)
        for category in (q.dataset or "default", "all"):
            row = table.setdefault(category, {"question": [], "hops": []})
            row["question"].append(ok)
            if q.hops:
                row["hops"].append(hop_ok[i])
    return {
        c: {
            "n": len(row["question"]),
            "question": sum(row["question"]) / len(row["question"]),
            "hops": sum(row["hops"]) / len(row["hops"]) if row["hops"] else None,
        }
        for c, row in sorted(table.items(), key=lambda item: item[0] == "all")
    }
