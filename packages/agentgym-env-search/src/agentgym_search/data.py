"""What the env searches and asks: a corpus and questions, from the embedded default, from paths,
or from a named data set a plugin declares.

Questions are FlashRAG's records: ``question``, ``golden_answers`` (a list, or one string), optional
``id`` and ``dataset`` (the task's category), from JSON Lines (``.jsonl``, ``.jsonl.gz``) or Parquet
(``.parquet``, needs pyarrow). Task ids index the question list: the test questions first, then the
train questions.

Where they come from, first match wins:

1. keyword arguments of the env (``agentgym.make("search", corpus=..., test=..., train=...)``);
2. ``AGENTGYM_SEARCH_DATA=<name>``: a data set declared through the ``agentgym_datasets`` hook;
3. ``AGENTGYM_SEARCH_CORPUS``, ``AGENTGYM_SEARCH_TEST``, ``AGENTGYM_SEARCH_TRAIN`` (paths; several
   question files joined with ``,``); any left unset is the embedded default's;
4. the embedded default: Wikipedia lead paragraphs and the questions generated from them.

Every process of a deployment (env servers, trainers) must see the same settings, so that a task id
means the same question everywhere: set the variables once, before starting them.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from agentgym_search.corpus import Corpus, CorpusError, json_lines

from agentgym.errors import lookup

EMBEDDED = "embedded"
ENV_VARS = {
    "data": "AGENTGYM_SEARCH_DATA",
    "corpus": "AGENTGYM_SEARCH_CORPUS",
    "test": "AGENTGYM_SEARCH_TEST",
    "train": "AGENTGYM_SEARCH_TRAIN",
}


@dataclass(frozen=True)
class Question:
    question: str
    golden_answers: tuple[str, ...]
    dataset: str = ""
    id: str = ""
    #: the derivation of a generated question: ``[{"question", "answer", "passage_id"}, ...]``
    hops: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_json(cls, row: Mapping[str, Any], where: str) -> Question:
        question = row.get("question")
        answers = row.get("golden_answers", row.get("answers"))
        if isinstance(answers, str):
            answers = [answers]
        if hasattr(answers, "tolist"):  # a numpy array, from Parquet
            answers = answers.tolist()
        if not isinstance(question, str) or not question.strip():
            raise CorpusError(f"{where}: a question needs a non-empty 'question'")
        if (
            not isinstance(answers, (list, tuple))
            or not answers
            or not all(isinstance(a, str) for a in answers)
        ):
            raise CorpusError(f"{where}: 'golden_answers' must be a non-empty list of strings")
        return cls(
            question.strip(),
            tuple(answers),
            str(row.get("dataset") or ""),
            str(row.get("id") or ""),
            tuple(row.get("hops") or ()),
        )


def read_questions(path: str | os.PathLike, default_dataset: str = "") -> list[Question]:
    path = Path(path)
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise CorpusError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
        if not path.is_file():
            raise CorpusError(f"no such file: {path}")
        rows = enumerate(pq.read_table(path).to_pylist(), 1)
    else:
        rows = json_lines(path)
    out = []
    for n, row in rows:
        q = Question.from_json(row, f"{path}:{n}")
        if not q.dataset:
            q = Question(
                q.question, q.golden_answers, default_dataset or path.stem.split(".")[0], q.id, q.hops
            )
        out.append(q)
    if not out:
        raise CorpusError(f"{path} holds no questions")
    return out


@dataclass
class SearchData:
    """A corpus (``"embedded"`` or a wiki-18 JSON Lines path) and test/train question files."""

    corpus: str = EMBEDDED
    test: Sequence[str] = field(default_factory=lambda: [EMBEDDED])
    train: Sequence[str] = field(default_factory=lambda: [EMBEDDED])
    description: str = ""

    @property
    def key(self) -> str:
        return self.corpus

    def load_corpus(self) -> Corpus:
        return shared_corpus(self.corpus)

    @cached_property
    def questions(self) -> dict[str, list[Question]]:
        return {"test": _questions(self.test, "test"), "train": _questions(self.train, "train")}

    @cached_property
    def all_questions(self) -> list[Question]:
        """Task ids index this list: test, then train."""
        return self.questions["test"] + self.questions["train"]

    def categories(self) -> dict[str, dict[str, list[int]]]:
        """split -> category -> task ids. For the embedded default read from ``meta.json`` (no
        question file is opened when plugins load)."""
        if list(self.test) == [EMBEDDED] and list(self.train) == [EMBEDDED]:
            meta = json.loads((resources.files("agentgym_search") / "data" / "meta.json").read_text())
            out, start = {}, 0
            for split in ("test", "train"):
                out[split] = {}
                for category, n in meta["splits"][split].items():
                    out[split][category] = list(range(start, start + n))
                    start += n
            return out
        out, start = {}, 0
        for split in ("test", "train"):
            out[split] = {}
            for i, q in enumerate(self.questions[split]):
                out[split].setdefault(q.dataset or "default", []).append(start + i)
            start += len(self.questions[split])
        return out


def _questions(sources: Sequence[str], split: str) -> list[Question]:
    out: list[Question] = []
    for source in sources:
        out += embedded_questions(split) if source == EMBEDDED else read_questions(source)
    return out


_embedded: dict[str, list[Question]] = {}
_data: dict[tuple[str, tuple[str, ...], tuple[str, ...]], SearchData] = {}
_corpora: dict[str, Corpus] = {}
_lock = threading.Lock()


def embedded_questions(split: str) -> list[Question]:
    with _lock:
        if split not in _embedded:
            data = resources.files("agentgym_search") / "data" / f"questions_{split}.jsonl.gz"
            with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
                _embedded[split] = [Question.from_json(json.loads(line), f"embedded {split}") for line in f]
        return _embedded[split]


def shared_corpus(source: str) -> Corpus:
    """One corpus per source per process, shared by every env instance and retriever."""
    with _lock:
        corpus = _corpora.get(source)
        if corpus is None:
            corpus = _corpora[source] = Corpus.embedded() if source == EMBEDDED else Corpus.from_jsonl(source)
        return corpus


def _paths(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


def configured_data(
    corpus: str | None = None,
    test: str | Sequence[str] | None = None,
    train: str | Sequence[str] | None = None,
    data: str | None = None,
) -> SearchData:
    """The data set from arguments, else the environment (see the module docstring)."""
    name = data or os.environ.get(ENV_VARS["data"], "").strip()
    if name and not (corpus or test or train):
        from agentgym.plugins import get_registry

        found = lookup(get_registry().named("agentgym_datasets"), name, "data set")
        return found() if callable(found) else found
    corpus = corpus or os.environ.get(ENV_VARS["corpus"], "").strip() or EMBEDDED
    if isinstance(test, str):
        test = _paths(test)
    if isinstance(train, str):
        train = _paths(train)
    test = test or _paths(os.environ.get(ENV_VARS["test"], "")) or [EMBEDDED]
    train = train or _paths(os.environ.get(ENV_VARS["train"], "")) or [EMBEDDED]
    key = (str(corpus), tuple(str(t) for t in test), tuple(str(t) for t in train))
    with _lock:  # one SearchData per setting: sessions share the question lists, read once
        data = _data.get(key)
        if data is None:
            data = _data[key] = SearchData(corpus=key[0], test=list(key[1]), train=list(key[2]))
        return data
