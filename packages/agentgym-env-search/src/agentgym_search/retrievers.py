"""Retrievers: ``search(queries, k) -> hits per query``, chosen by name, extendable by plugins.

Built in (registered through the ``agentgym_retrievers`` hook like a third party's): ``bm25``
(bm25s, no model), ``dense`` (sentence-transformers + FAISS over a local model path; the ``dense``
extra) and ``http`` (a client of the retrieval-server protocol of Search-R1 and AgentGym-RL,
``POST /retrieve {"queries", "topk", "return_scores"}``). A factory is called as
``factory(corpus, **options)``; ``corpus`` is ``None`` for retrievers that bring their own
(``http``), which declare ``needs_corpus = False``.

One retriever per process per (name, corpus, options) is shared by every env instance
(:func:`shared_retriever`), and queries that sessions send while a search is running are answered
together by the next call (:class:`Batcher`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from agentgym_search.cache import build_dir_for, index_dir, publish
from agentgym_search.corpus import Corpus

from agentgym.errors import AgentGymError, lookup


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    text: str
    score: float

    @property
    def contents(self) -> str:
        return f'"{self.title}"\n{self.text}'

    def to_json(self) -> dict[str, Any]:
        """The protocol's document: wiki-18's ``{"id", "contents"}``."""
        return {"id": self.id, "contents": self.contents}


class Retriever(Protocol):
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]: ...


class RetrieverError(AgentGymError):
    """A retriever that cannot be built or cannot answer (a missing extra, a server down)."""

    code = "retriever_failed"
    status = 502


# -- bm25 ---------------------------------------------------------------------------------------------
class BM25Retriever:
    """bm25s (Lucene's BM25, English stop words, Snowball stemming) over the passages' contents.

    The index is built once per corpus and cached on disk (``cache.py``); later processes load it in
    a fraction of the build time."""

    needs_corpus = True
    VERSION = "1"  # bump when tokenisation or parameters change: the cache key includes it

    def __init__(self, corpus: Corpus, k1: float = 1.5, b: float = 0.75, cache: bool = True):
        import bm25s
        import Stemmer

        self.corpus = corpus
        self._bm25s = bm25s
        self._stemmer = Stemmer.Stemmer("english")
        self._lock = threading.Lock()  # bm25s's retrieve is not documented as thread-safe
        folder = index_dir(f"bm25v{self.VERSION}", corpus.digest, f"k{k1}-b{b}")
        if cache and (folder / "params.index.json").is_file():
            self.index = bm25s.BM25.load(str(folder), show_progress=False)
            self.loaded_from_cache = True
            return
        self.index = bm25s.BM25(k1=k1, b=b)
        self.index.index(self._tokens(corpus.contents), show_progress=False)
        self.loaded_from_cache = False
        if cache:
            tmp = build_dir_for(folder)
            self.index.save(str(tmp), show_progress=False)
            publish(tmp, folder)

    def _tokens(self, texts: Sequence[str]) -> Any:
        return self._bm25s.tokenize(
            list(texts), stopwords="en", stemmer=self._stemmer, show_progress=False, return_ids=False
        )

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if not queries:
            return []
        k = max(1, min(k, len(self.corpus)))
        with self._lock:
            docs, scores = self.index.retrieve(self._tokens(queries), k=k, show_progress=False, n_threads=0)
        passages = self.corpus.passages
        return [
            [
                Hit(passages[i].id, passages[i].title, passages[i].text, float(s))
                for i, s in zip(row_docs, row_scores, strict=True)
                if s > 0  # a query with no known word matches nothing
            ]
            for row_docs, row_scores in zip(docs.tolist(), scores.tolist(), strict=True)
        ]


# -- http ---------------------------------------------------------------------------------------------
class HTTPRetriever:
    """A client of ``POST {url}/retrieve {"queries": [...], "topk": k, "return_scores": true}``, which
    answers ``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` (Search-R1's
    ``retrieval_server.py``; without scores, a list of documents per query). Point it at an e5/wiki-18
    server you already run, or at ``agentgym search serve-retriever``."""

    needs_corpus = False

    def __init__(self, corpus: Corpus | None = None, url: str = "", timeout: float = 30.0, token: str = ""):
        import httpx

        if not url:
            raise RetrieverError("the http retriever needs a url (AGENTGYM_SEARCH_RETRIEVER_URL)")
        self.url = url.rstrip("/")
        if not self.url.endswith("/retrieve"):
            self.url += "/retrieve"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(timeout=timeout, headers=headers)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        import httpx

        if not queries:
            return []
        try:
            reply = self.client.post(
                self.url, json={"queries": list(queries), "topk": k, "return_scores": True}
            )
            reply.raise_for_status()
            rows = reply.json()["result"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise RetrieverError(f"retrieval server {self.url}: {type(exc).__name__}: {exc}") from exc
        return [[_hit(doc) for doc in row] for row in rows]


def _hit(item: Any) -> Hit:
    score = 0.0
    if isinstance(item, dict) and "document" in item:
        score = float(item.get("score", 0.0))
        item = item["document"]
    if not isinstance(item, dict):
        raise RetrieverError(f"a retrieval result must be a document object, got {json.dumps(item)[:80]}")
    if "contents" in item:
        title, _, text = str(item["contents"]).partition("\n")
        title = title.strip().strip('"')
    else:
        title, text = str(item.get("title", "")), str(item.get("text", ""))
    return Hit(str(item.get("id", "")), title, text, score)


# -- the registry and the shared instances --------------------------------------------------------------
BUILTIN: dict[str, Callable[..., Retriever] | str] = {
    "bm25": BM25Retriever,
    "dense": "agentgym_search.dense:DenseRetriever",
    "http": HTTPRetriever,
}


def retriever_factories() -> dict[str, Any]:
    """Every retriever by name: the ``agentgym_retrievers`` hook over all plugins."""
    from agentgym.plugins import get_registry

    return get_registry().named("agentgym_retrievers")


def make_retriever(name: str, corpus: Callable[[], Corpus | None]) -> Callable[..., Retriever]:
    """``(**options) -> retriever`` for the retriever ``name``; ``corpus()`` is called only for a
    retriever that needs one (an ``http`` client never loads the corpus)."""
    from agentgym.spec import resolve

    factory = resolve(lookup(retriever_factories(), name, "retriever"))
    needs = getattr(factory, "needs_corpus", True)
    return lambda **options: factory(corpus() if needs else None, **options)


class Batcher:
    """Answers concurrent ``search`` calls with as few retriever calls as possible.

    No timer: the first caller runs a batch; callers arriving meanwhile queue, and the one that ran
    the batch runs the next with everything queued, so the batch size follows the load."""

    def __init__(self, retriever: Retriever):
        self.retriever = retriever
        self._lock = threading.Lock()
        self._queue: list[tuple[str, int, Future]] = []
        self._running = False
        self.calls = 0  # retriever calls made, for the benchmark

    def search(self, query: str, k: int) -> list[Hit]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        futures: list[Future] = [Future() for _ in queries]
        with self._lock:
            self._queue += [(q, k, f) for q, f in zip(queries, futures, strict=True)]
            lead = not self._running
            self._running = True
        if lead:
            self._drain()
        return [f.result() for f in futures]

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._running = False
                    return
            k = max(k for _, k, _ in batch)
            try:
                self.calls += 1
                results = self.retriever.search([q for q, _, _ in batch], k)
            except BaseException as exc:  # every waiter gets the error, and the next batch still runs
                for _, _, f in batch:
                    f.set_exception(exc)
                continue
            for (_, want, f), hits in zip(batch, results, strict=True):
                f.set_result(hits[:want])


_shared: dict[tuple, Batcher] = {}
_shared_lock = threading.Lock()


def shared_retriever(
    name: str, corpus_key: str, corpus: Callable[[], Corpus | None], **options: Any
) -> Batcher:
    """The process's one retriever for (name, corpus, options), built on first use."""
    key = (name, corpus_key, json.dumps(options, sort_keys=True, default=str))
    with _shared_lock:
        batcher = _shared.get(key)
        if batcher is None:
            batcher = _shared[key] = Batcher(make_retriever(name, corpus)(**options))
        return batcher
