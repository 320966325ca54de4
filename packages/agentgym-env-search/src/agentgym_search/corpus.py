"""Passages: the corpus a retriever searches, in wiki-18's form, and the answer normalisation.

A corpus is a list of passages ``{"id", "contents"}`` where ``contents`` is ``"Title"\\ntext``
(the JSON Lines of Search-R1's and FlashRAG's wiki-18). The embedded default is built from the
Wikipedia lead paragraphs in ``data/wiki_leads.jsonl.gz`` (see ``data/ATTRIBUTION.md``), split
into passages of about 100 words at sentence boundaries, as wiki-18 splits whole articles.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import string
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path

from agentgym.errors import AgentGymError

PASSAGE_WORDS = 100
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        return f'"{self.title}"\n{self.text}'


class CorpusError(AgentGymError):
    """A corpus or question file that cannot be read (with the path and the line)."""

    code = "search_data"


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


_PUNCTUATION = frozenset(string.punctuation)


def contains_answer(passage_text: str, answer: str) -> bool:
    """Whether the normalised answer occurs in the normalised passage as whole words."""
    needle = normalize_answer(answer)
    if not needle:
        return False
    return f" {needle} " in f" {normalize_answer(passage_text)} "


def split_passages(text: str, words: int = PASSAGE_WORDS) -> list[str]:
    """Sentences packed greedily into chunks of at most ``words`` words (a longer sentence alone)."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for paragraph in text.split("\n"):
        for sentence in _SENTENCE_END.split(paragraph.strip()):
            n = len(sentence.split())
            if not n:
                continue
            if current and size + n > words:
                chunks.append(" ".join(current))
                current, size = [], 0
            current.append(sentence)
            size += n
    if current:
        chunks.append(" ".join(current))
    return chunks


class Corpus:
    """The passages, in id order, with the content hash that keys cached indexes."""

    def __init__(self, passages: list[Passage], digest: str, source: str):
        if not passages:
            raise CorpusError(f"the corpus {source} has no passages")
        self.passages = passages
        self.digest = digest
        self.source = source

    def __len__(self) -> int:
        return len(self.passages)

    @cached_property
    def contents(self) -> list[str]:
        return [p.contents for p in self.passages]

    @cached_property
    def by_title(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, p in enumerate(self.passages):
            out.setdefault(p.title, []).append(i)
        return out

    # -- sources ----------------------------------------------------------------------------------
    @classmethod
    def embedded(cls) -> Corpus:
        passages: list[Passage] = []
        for article in read_articles():
            for chunk in split_passages(article["extract"]):
                passages.append(Passage(str(len(passages)), article["title"], chunk))
        digest = hashlib.sha256(
            "\n".join(json.dumps([p.id, p.title, p.text]) for p in passages).encode()
        ).hexdigest()
        return cls(passages, digest, "embedded (Wikipedia lead paragraphs)")

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike) -> Corpus:
        """A wiki-18 style JSON Lines file: ``{"id", "contents": "\\"Title\\"\\ntext"}`` per line
        (``title`` and ``text`` fields are read too, as FlashRAG's other corpora have them)."""
        path = Path(path)
        passages = []
        for n, row in json_lines(path):
            if "contents" in row:
                title, _, text = str(row["contents"]).partition("\n")
                title = title.strip().strip('"')
            elif "text" in row:
                title, text = str(row.get("title", "")), str(row["text"])
            else:
                raise CorpusError(f"{path}:{n}: a passage needs 'contents' (or 'title' and 'text')")
            passages.append(Passage(str(row.get("id", len(passages))), title, text))
        return cls(passages, file_digest(path), str(path))


def read_articles() -> Iterator[dict]:
    """The embedded Wikipedia leads: ``{"title", "description", "topic", "extract"}``."""
    data = resources.files("agentgym_search") / "data" / "wiki_leads.jsonl.gz"
    with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def json_lines(path: Path) -> Iterable[tuple[int, dict]]:
    if not path.is_file():
        raise CorpusError(f"no such file: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise CorpusError(f"{path}:{n}: not JSON ({exc})") from None
            if not isinstance(row, dict):
                raise CorpusError(f"{path}:{n}: expected a JSON object")
            yield n, row


_digests: dict[tuple[str, int, int], str] = {}
_digest_lock = threading.Lock()


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes; remembered per (path, size, mtime) in this process and in
    the index cache (``cache.py``), so a large corpus is hashed once, not at every start."""
    from agentgym_search.cache import remembered_digest

    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _digest_lock:
        if key in _digests:
            return _digests[key]
    digest = remembered_digest(key)
    if digest is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = h.hexdigest()
        remembered_digest(key, digest)
    with _digest_lock:
        _digests[key] = digest
    return digest
