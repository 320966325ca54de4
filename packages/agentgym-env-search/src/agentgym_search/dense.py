"""The ``dense`` retriever: a local sentence-transformers model and an exact FAISS inner-product index.

As the reference's e5 retriever (Search-R1's ``retrieval_server.py`` with e5-base-v2 over wiki-18):
passages are encoded as ``"passage: " + contents`` and queries as ``"query: " + query``, both
L2-normalised, and ranked by inner product (``faiss.IndexFlatIP``: exact, no training). The model is
a directory the user gives (``AGENTGYM_SEARCH_MODEL`` or ``--model``); nothing is downloaded. The
passage index is built once per (corpus, model files, passage prefix) and cached on disk
(``cache.py``). Needs the ``dense`` extra; sentence-transformers and faiss are imported only when a
retriever is built, so importing this module is cheap.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym_search.cache import build_dir_for, index_dir, publish
from agentgym_search.corpus import Corpus, file_digest
from agentgym_search.retrievers import Hit, RetrieverError

INDEX_FILE = "index.faiss"
META_FILE = "meta.json"


def model_fingerprint(model_dir: Path) -> str:
    """A short hash of a model directory: every file's relative name, size and content hash.

    Content, not mtimes: a model copied elsewhere keeps its index, a retrained one in the same
    place gets a new one. ``file_digest`` remembers each file's hash per (path, size, mtime), so
    the weights are read once, not at every start. Hidden folders (``.git``, ``.cache``) are
    skipped: they hold no weights the model loads, and a git history can be huge."""
    h = hashlib.sha256()
    for path in sorted(model_dir.rglob("*")):
        rel = path.relative_to(model_dir)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        h.update(f"{rel.as_posix()}\0{path.stat().st_size}\0{file_digest(path)}\n".encode())
    return h.hexdigest()[:12]


class DenseRetriever:
    """sentence-transformers embeddings (normalised) ranked by FAISS inner product.

    ``model`` is a local sentence-transformers model directory; ``query_prefix`` and
    ``passage_prefix`` default to e5's. ``loaded_from_cache`` says whether the passage index was
    read from disk rather than encoded."""

    needs_corpus = True
    VERSION = "1"  # bump when encoding or the index layout changes: the cache key includes it

    def __init__(
        self,
        corpus: Corpus,
        model: str = "",
        batch_size: int = 64,
        device: str = "cpu",
        cache: bool = True,
        query_prefix: str = "query: ",
        passage_prefix: str = "passage: ",
    ):
        model_dir = Path(model).expanduser() if model else None
        if model_dir is None or not model_dir.is_dir():
            where = f"{model!r} is not a directory" if model else "no model was given"
            raise RetrieverError(
                f"the dense retriever needs a local sentence-transformers model directory ({where}): "
                "pass its path as AGENTGYM_SEARCH_MODEL or --model (nothing is downloaded)"
            )
        try:
            import faiss
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise RetrieverError(
                f"the dense retriever needs sentence-transformers and faiss ({exc.name or exc} is missing): "
                'pip install "agentgym-env-search[dense]"'
            ) from None

        self.corpus = corpus
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._faiss = faiss
        self._lock = threading.Lock()  # one encoder and one index shared by every session's thread
        try:
            # A directory path never reaches the hub; local_files_only makes sure a missing file
            # fails here instead of being fetched.
            self.model = SentenceTransformer(
                str(model_dir), device=device, local_files_only=True, trust_remote_code=False
            )
        except Exception as exc:  # a folder that is not a model: say which, in one line
            raise RetrieverError(
                f"cannot load a sentence-transformers model from {model_dir}: "
                f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            ) from exc

        self.index, self.loaded_from_cache = self._passage_index(model_dir, cache)

    def _passage_index(self, model_dir: Path, cache: bool) -> tuple[Any, bool]:
        """The passages' index and whether it came from the disk cache: read when a whole one is
        there, else encoded (and saved, with ``cache``)."""
        faiss, corpus = self._faiss, self.corpus
        # The query prefix is not in the key: it does not change the passages' embeddings.
        key = f"{model_fingerprint(model_dir)}\0{self.passage_prefix}"
        settings = hashlib.sha256(key.encode()).hexdigest()[:12]
        folder = index_dir(f"dense-v{self.VERSION}", corpus.digest, settings)
        if cache and (folder / INDEX_FILE).is_file():
            index = faiss.read_index(str(folder / INDEX_FILE))
            if index.ntotal == len(corpus):  # a truncated or foreign file is rebuilt, not trusted
                return index, True
        index = self._build()
        if cache:
            tmp = build_dir_for(folder)
            faiss.write_index(index, str(tmp / INDEX_FILE))
            meta = {"model": str(model_dir.resolve()), "passages": len(corpus), "corpus": corpus.source}
            (tmp / META_FILE).write_text(json.dumps(meta, indent=1))
            publish(tmp, folder)
        return index, False

    def _encode(self, texts: Sequence[str], prefix: str) -> Any:
        # prompt= rather than prepending ourselves: an explicit prompt (even "") overrides a default
        # prompt saved with the model, so the prefix given here is the only one applied.
        vectors = self.model.encode(
            list(texts),
            prompt=prefix,
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return vectors.astype("float32", copy=False)

    def _build(self) -> Any:
        vectors = self._encode(self.corpus.contents, self.passage_prefix)
        index = self._faiss.IndexFlatIP(vectors.shape[1])
        index.add(vectors)
        return index

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if not queries:
            return []
        k = max(1, min(k, len(self.corpus)))
        with self._lock:
            scores, ids = self.index.search(self._encode(queries, self.query_prefix), k)
        passages = self.corpus.passages
        return [
            [
                Hit(passages[i].id, passages[i].title, passages[i].text, float(s))
                for i, s in zip(row_ids, row_scores, strict=True)
                if i >= 0  # FAISS pads a short result with -1
            ]
            for row_ids, row_scores in zip(ids.tolist(), scores.tolist(), strict=True)
        ]
