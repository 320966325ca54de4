"""WebArena's evaluators: ``string_match``, ``url_match``, ``program_html``, to its semantics.

A task's score is the product of its evaluators' scores (0 or 1 each), as in WebArena.

- ``string_match`` compares the agent's ``stop [answer]`` with ``reference_answers``:
  ``exact_match`` (equal after cleaning: stripped, outer quotes removed, lower case),
  ``must_include`` (every value occurs in the answer; a single value must occur as whole words),
  ``fuzzy_match`` (an LLM judge over any OpenAI-compatible endpoint; ``"N/A"`` is an exact match).
  Without a judge configured a fuzzy check is reported as skipped, not scored.
- ``url_match``: the page's URL against ``reference_url`` (alternatives joined by `` |OR| ``): the
  reference's host and path contained in the page's, and every reference query parameter present
  with its values.
- ``program_html``: for each target, open ``url`` (``last`` = the agent's current page) in the same
  browser context, take ``locator`` (a JavaScript expression starting with ``document.``, whose
  value is "" when it throws; the page's HTML when empty), and check ``required_contents`` (``exact_match`` or
  ``must_include``, whose values may list alternatives with `` |OR| ``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

from agentgym.errors import AgentGymError

OR = " |OR| "


class TaskConfigError(AgentGymError):
    code = "task_config"
    status = 422


@dataclass
class Verdict:
    score: float
    checks: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def clean(text: Any) -> str:
    text = str(text).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return text.lower().strip()


def _words(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text)


def _contains_words(haystack: str, needle: str) -> bool:
    hay, words = _words(haystack), _words(needle)
    n = len(words)
    return n > 0 and any(hay[i : i + n] == words for i in range(len(hay) - n + 1))


def string_match(answer: str, reference: Mapping[str, Any], intent: str, judge: Any = None) -> Verdict:
    pred = clean(answer)
    verdict = Verdict(1.0)
    for kind, value in reference.items():
        if kind == "exact_match":
            ok = pred == clean(value)
        elif kind == "must_include":
            values = value if isinstance(value, list) else [value]
            if len(values) == 1:
                ok = _contains_words(pred, clean(values[0]))
            else:
                ok = all(clean(v) in pred for v in values)
        elif kind == "fuzzy_match":
            if value == "N/A":
                ok = pred == "n/a"
            elif judge is None:
                verdict.skipped.append("string_match.fuzzy_match (no LLM judge configured)")
                continue
            else:
                values = value if isinstance(value, list) else [value]
                ok = all(judge(intent, answer, v) for v in values)
        else:
            raise TaskConfigError(f"unknown reference_answers kind {kind!r}")
        verdict.checks.append({"eval": f"string_match.{kind}", "ok": ok})
        if not ok:
            verdict.score = 0.0
    return verdict


def _url_parts(url: str) -> tuple[str, dict[str, list[str]]]:
    parsed = urlparse(url.strip().rstrip("/"))
    return parsed.netloc + parsed.path.rstrip("/"), parse_qs(parsed.query)


def url_match(page_url: str, reference_url: str) -> Verdict:
    pred_base, pred_query = _url_parts(page_url)
    for ref in reference_url.split(OR):
        ref_base, ref_query = _url_parts(ref)
        base_ok = ref_base in pred_base
        query_ok = all(set(values) <= set(pred_query.get(key, [])) for key, values in ref_query.items())
        if base_ok and query_ok:
            return Verdict(1.0, [{"eval": "url_match", "ok": True, "url": page_url}])
    return Verdict(0.0, [{"eval": "url_match", "ok": False, "url": page_url}])


#: ``(url or "last", locator) -> text``, run in the task's browser context
Fetch = Callable[[str, str], Awaitable[str]]


async def program_html(targets: list[Mapping[str, Any]], fetch: Fetch) -> Verdict:
    verdict = Verdict(1.0)
    for target in targets:
        url, locator = str(target.get("url", "last")), str(target.get("locator", ""))
        if url.startswith("func:") or locator.startswith("func:"):
            raise TaskConfigError(
                f"program_html helper functions ({url if url.startswith('func:') else locator}) are "
                "not supported: give a URL and a document.* locator"
            )
        content = await fetch(url, locator)
        required = target.get("required_contents", {})
        checks = []
        if "exact_match" in required:
            checks.append(clean(required["exact_match"]) == clean(content))
        for value in required.get("must_include", []):
            checks.append(any(clean(alt) in clean(content) for alt in str(value).split(OR)))
        ok = all(checks) if checks else False
        verdict.checks.append({"eval": "program_html", "url": url, "locator": locator, "ok": ok})
        if not ok:
            verdict.score = 0.0
    return verdict


async def evaluate(
    task: Mapping[str, Any], answer: str, page_url: str, fetch: Fetch, judge: Any = None
) -> Verdict:
    spec = task.get("eval", {})
    total = Verdict(1.0)
    for kind in spec.get("eval_types", []):
        if kind == "string_match":
            part = string_match(answer, spec.get("reference_answers") or {}, task.get("intent", ""), judge)
        elif kind == "url_match":
            part = url_match(page_url, str(spec.get("reference_url") or ""))
        elif kind == "program_html":
            part = await program_html(spec.get("program_html") or [], fetch)
        else:
            raise TaskConfigError(
                f"unknown eval type {kind!r} (known: string_match, url_match, program_html)"
            )
        total.score *= part.score
        total.checks += part.checks
        total.skipped += part.skipped
    return total


class Judge:
    """``fuzzy_match`` by an LLM over an OpenAI-compatible endpoint: ``$AGENTGYM_WEBARENA_JUDGE_URL``
    (the base URL, e.g. http://localhost:8000/v1), ``$AGENTGYM_WEBARENA_JUDGE_MODEL``, and
    ``$AGENTGYM_WEBARENA_JUDGE_KEY`` (or ``$OPENAI_API_KEY``)."""

    def __init__(self, base_url: str, model: str, api_key: str = ""):
        import httpx

        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(timeout=60, headers=headers)

    @classmethod
    def from_env(cls) -> Judge | None:
        url = os.environ.get("AGENTGYM_WEBARENA_JUDGE_URL", "").strip()
        if not url:
            return None
        key = os.environ.get("AGENTGYM_WEBARENA_JUDGE_KEY") or os.environ.get("OPENAI_API_KEY", "")
        return cls(url, os.environ.get("AGENTGYM_WEBARENA_JUDGE_MODEL", "gpt-4o-mini"), key)

    def __call__(self, intent: str, answer: str, reference: str) -> bool:
        prompt = (
            "Help a teacher grade a student's answer. The question is about a web task.\n"
            f"Question: {intent}\nReference answer: {reference}\nStudent answer: {answer}\n"
            "Is the student's answer semantically equivalent to the reference answer? "
            "Reply with one word: correct, incorrect or partially correct."
        )
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt}], "temperature": 0}
        reply = self.client.post(self.url, json=body)
        reply.raise_for_status()
        verdict = reply.json()["choices"][0]["message"]["content"].lower()
        return "incorrect" not in verdict and "partially" not in verdict and "correct" in verdict
