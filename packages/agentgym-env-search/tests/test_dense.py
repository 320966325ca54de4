"""The dense retriever over a tiny, randomly initialised BERT built here: no download, no network.

A random model ranks nothing meaningfully, but it maps the same text to the same embedding, so a
query equal to a passage's indexed text (prefix included) must find that passage first."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

pytest.importorskip("faiss")
pytest.importorskip("sentence_transformers")

from agentgym_search.corpus import Corpus  # noqa: E402
from agentgym_search.retrievers import RetrieverError  # noqa: E402

pytestmark = pytest.mark.slow  # importing torch and sentence-transformers alone takes seconds

PASSAGES = [
    ("Amazon River", "The Amazon river flows through Brazil and Peru into the Atlantic ocean."),
    ("Mount Everest", "Everest is the highest mountain on Earth, on the border of Nepal and China."),
    ("Photosynthesis", "Plants use sunlight, water and carbon dioxide to make sugar and oxygen."),
    ("Violin", "A violin is a wooden string instrument played with a bow."),
    ("Jupiter", "Jupiter is the largest planet of the solar system, a gas giant with many moons."),
    ("Chess", "Chess is a board game for two players, each with sixteen pieces."),
]
QUESTIONS = [
    {"question": "Which river flows through Brazil?", "golden_answers": ["Amazon"], "dataset": "nq"},
    {"question": "What is the largest planet?", "golden_answers": ["Jupiter"], "dataset": "hotpotqa"},
]


def _words(text: str) -> list[str]:
    # BERT's basic tokenizer: lower case, punctuation split off as tokens of its own
    return re.findall(r"\w+|[^\w\s]", text.lower())


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 2-layer, 32-wide BERT with mean pooling whose WordPiece vocabulary holds every word used."""
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Pooling, Transformer

    root = tmp_path_factory.mktemp("tiny-model")
    bert_dir, st_dir = root / "bert", root / "st"
    bert_dir.mkdir()
    texts = [f'"{t}"\n{x}' for t, x in PASSAGES] + [q["question"] for q in QUESTIONS] + ["query: passage:"]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted({w for t in texts for w in _words(t)})
    (bert_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    # from_pretrained on the folder, not BertTokenizerFast(vocab_file=...): transformers 5 ignores
    # that keyword and would map every word to [UNK]
    tokenizer = BertTokenizerFast.from_pretrained(str(bert_dir), local_files_only=True)
    assert tokenizer.unk_token_id not in tokenizer("amazon river")["input_ids"]
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(str(bert_dir))
    tokenizer.save_pretrained(str(bert_dir))
    transformer = Transformer(str(bert_dir))
    pooling = Pooling(config.hidden_size, "mean")
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(st_dir))
    return str(st_dir)


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexes go to tmp_path, and any attempt to reach the network fails the test."""
    monkeypatch.setenv("AGENTGYM_SEARCH_CACHE", str(tmp_path / "cache"))

    def refuse(self: socket.socket, address: object) -> None:
        raise AssertionError(f"the dense retriever tried to connect to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture
def corpus_path(tmp_path: Path) -> Path:
    path = tmp_path / "wiki.jsonl"
    rows = [{"id": str(i), "contents": f'"{t}"\n{x}'} for i, (t, x) in enumerate(PASSAGES)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("prefix", ["", "passage: "])
def test_exact_text_ranks_its_passage_first(model_path: str, corpus_path: Path, prefix: str) -> None:
    from agentgym_search.dense import DenseRetriever

    corpus = Corpus.from_jsonl(corpus_path)
    retriever = DenseRetriever(corpus, model=model_path, query_prefix=prefix, passage_prefix=prefix)
    assert retriever.loaded_from_cache is False and retriever.corpus is corpus
    results = retriever.search(corpus.contents, 3)
    assert len(results) == len(corpus)
    for passage, hits in zip(corpus.passages, results, strict=True):
        assert len(hits) == 3
        assert (hits[0].id, hits[0].title, hits[0].text) == (passage.id, passage.title, passage.text)
        assert hits[0].score == pytest.approx(1.0, abs=1e-4)  # normalised: the same text scores 1
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert all(isinstance(h.score, float) for h in hits)
    assert retriever.search([], 3) == []


def test_k_is_clipped_and_the_index_is_cached(model_path: str, corpus_path: Path, tmp_path: Path) -> None:
    from agentgym_search.dense import DenseRetriever

    corpus = Corpus.from_jsonl(corpus_path)
    first = DenseRetriever(corpus, model=model_path)
    queries = ["largest planet", "a string instrument"]
    hits = first.search(queries, 50)
    assert [len(row) for row in hits] == [len(corpus)] * 2
    assert [len(row) for row in first.search(queries, 0)] == [1, 1]
    assert list((tmp_path / "cache").glob("dense-v1-*/index.faiss"))

    second = DenseRetriever(corpus, model=model_path)
    assert second.loaded_from_cache is True
    assert second.search(queries, 50) == hits

    # the passage prefix changes the embeddings, so it keys another index
    other = DenseRetriever(corpus, model=model_path, passage_prefix="")
    assert other.loaded_from_cache is False
    assert DenseRetriever(corpus, model=model_path, cache=False).loaded_from_cache is False


@pytest.mark.parametrize("model", ["", "does/not/exist"])
def test_a_missing_model_says_what_to_pass(corpus_path: Path, tmp_path: Path, model: str) -> None:
    from agentgym_search.dense import DenseRetriever

    with pytest.raises(RetrieverError) as info:
        DenseRetriever(Corpus.from_jsonl(corpus_path), model=str(tmp_path / model) if model else "")
    message = str(info.value)
    assert "AGENTGYM_SEARCH_MODEL" in message and "--model" in message and "\n" not in message


def test_a_folder_that_is_not_a_model(corpus_path: Path, tmp_path: Path) -> None:
    from agentgym_search.dense import DenseRetriever

    with pytest.raises(RetrieverError, match="cannot load a sentence-transformers model"):
        DenseRetriever(Corpus.from_jsonl(corpus_path), model=str(tmp_path))


def test_search_env_with_the_dense_retriever(model_path: str, corpus_path: Path, tmp_path: Path) -> None:
    from agentgym_search.env import SearchEnv

    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    env = SearchEnv(
        retriever="dense",
        retriever_options={"model": model_path, "query_prefix": "", "passage_prefix": ""},
        corpus=str(corpus_path),
        test=str(questions),
        train=str(questions),
    )
    observation, info = env.reset(options={"task_id": 0})
    assert observation.startswith(f"Question: {QUESTIONS[0]['question']}") and info["category"] == "nq"
    text, reward, done, _, _ = env.step("<search> Which river flows through Brazil? </search>")
    assert text.startswith("<information>Doc 1(Title: ")
    assert text.count("Doc ") == 3 and (reward, done) == (0.0, False)
