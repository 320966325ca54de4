"""The search env: actions, scoring, the expert, a user's own corpus and questions, the retrievers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from agentgym_search.corpus import Corpus, contains_answer
from agentgym_search.data import SearchData, embedded_questions
from agentgym_search.env import SearchEnv, exact_match, token_f1
from agentgym_search.expert import SearchExpert
from agentgym_search.retrievers import Batcher, BM25Retriever, HTTPRetriever

import agentgym
from agentgym.errors import UnknownNameError, UnknownTaskError
from agentgym.plugins import get_registry
from agentgym.server.background import serve_in_thread

# -- a user's own data: a wiki-18 corpus and FlashRAG questions, written by the test ----------------
PASSAGES = [
    ("Zorblat", "Zorblat is a fictional moon of the planet Quenta, discovered by Mira Voss in 2091."),
    ("Mira Voss", "Mira Voss is a Tellurian astronomer who works at the Kestrel Observatory."),
    ("Kestrel Observatory", "The Kestrel Observatory stands on Mount Arrow, above the town of Lindel."),
    ("Quenta", "Quenta is a gas giant with eleven moons and a faint ring system."),
    ("Lindel", "Lindel is a mountain town known for its glass bells and cold winters."),
]
QUESTIONS = [
    {"question": "Who discovered Zorblat?", "golden_answers": ["Mira Voss"], "dataset": "toy-1hop"},
    {
        "question": "On which mountain is the Kestrel Observatory?",
        "golden_answers": ["Mount Arrow"],
        "dataset": "toy-1hop",
    },
    {
        "question": "How many moons does Quenta have?",
        "golden_answers": ["eleven", "11"],
        "dataset": "toy-count",
    },
]


def write_user_data(folder: Path) -> tuple[Path, Path, Path]:
    corpus = folder / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": str(i), "contents": f'"{t}"\n{x}'}) + "\n" for i, (t, x) in enumerate(PASSAGES)
        )
    )
    test, train = folder / "test.jsonl", folder / "train.jsonl"
    test.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS[:2]))
    train.write_text(json.dumps(QUESTIONS[2]) + "\n")
    return corpus, test, train


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- actions and scoring --------------------------------------------------------------------------
def test_search_answers_and_invalid_actions_as_search_r1():
    env = agentgym.make("search")
    obs, info = env.reset(options={"task_id": 130})  # a nationality question of the embedded test split
    q = env.question
    assert obs == f"Question: {q.question}" and "<search>" in info["instruction"]
    assert info["category"] == q.dataset

    obs, reward, terminated, truncated, info = env.step(f"<search>{q.question}</search>")
    assert obs.startswith("<information>Doc 1(Title: ") and obs.endswith("</information>")
    assert obs.count("Doc ") == 3 and reward == 0 and not terminated and info["valid_action"]

    obs, reward, terminated, _, info = env.step("<answer>Martian</answer>")
    assert reward == 0 and not terminated and info["em"] == 0 and "wrong" in obs  # not terminal

    obs, reward, terminated, _, info = env.step("I am not sure what to do")
    assert not info["valid_action"] and "<search>" in obs and "<answer>" in obs and not terminated

    # the model's whole text is accepted too: the first tag counts
    obs, reward, terminated, _, info = env.step(
        f"<think>easy</think> <answer> {q.golden_answers[0].upper()}! </answer>"
    )
    assert reward == 1.0 and terminated and info["success"] and info["em"] == 1.0 and info["f1"] == 1.0
    assert env.score == 1.0


def test_a_query_matching_nothing_says_so():
    env = agentgym.make("search")
    env.reset(options={"task_id": 0})
    obs, *_ = env.step("<search>qqqzzx</search>")
    assert "No passage matches" in obs


def test_wrong_answer_ends_the_episode_when_asked_and_f1_scoring():
    env = SearchEnv(end_on_answer=True)
    env.reset(options={"task_id": 0})
    obs, reward, terminated, _, info = env.step("<answer>nobody</answer>")
    assert terminated and reward == 0 and not info["success"] and env.question.golden_answers[0] in obs

    env = SearchEnv(scoring="f1")
    q_id = next(i for i, q in enumerate(embedded_questions("test")) if len(q.golden_answers[0].split()) >= 2)
    env.reset(options={"task_id": q_id})
    gold = env.question.golden_answers[0]
    first = gold.split()[0]
    _, reward, terminated, _, info = env.step(f"<answer>{first}</answer>")
    assert 0 < reward < 1 and not terminated and info["f1"] == pytest.approx(reward)
    _, again, *_ = env.step(f"<answer>{first}</answer>")
    assert again == 0  # the return is the best answer's score, not a sum
    _, reward, terminated, _, _ = env.step(f"<answer>{gold}</answer>")
    assert terminated and env.score == 1.0
    with pytest.raises(ValueError, match="scoring"):
        SearchEnv(scoring="bleu")


def test_the_answer_f1_reward_pays_the_f1_envs_rewards_on_an_exact_match_episode():
    """Training on F1 while the env (and every evaluation) keeps exact match: the transform gives
    an EM episode the rewards the F1-scored env pays for the same actions."""
    from agentgym.rewards import apply_reward_transform
    from agentgym.trajectory import Episode, Step

    q_id = next(i for i, q in enumerate(embedded_questions("test")) if len(q.golden_answers[0].split()) >= 2)
    gold = embedded_questions("test")[q_id].golden_answers[0]
    actions = [
        f"<search>{gold}</search>",
        f"<answer>{gold.split()[0]}</answer>",  # partial credit under F1, none under EM
        "<answer>nobody</answer>",  # worse than the best so far: nothing
        f"<answer>{gold}</answer>",
    ]
    paid, steps = {}, []
    for scoring in ("em", "f1"):
        env = SearchEnv(scoring=scoring)
        env.reset(options={"task_id": q_id})
        rewards = []
        for action in actions:
            _, reward, _, _, info = env.step(action)
            rewards.append(reward)
            if scoring == "em":
                steps.append(Step(action=action, reward=reward, info=info))
        paid[scoring] = rewards
    assert paid["em"] == [0, 0, 0, 1] and 0 < paid["f1"][1] < 1
    episode = Episode(env="search", task_id=q_id, steps=steps, success=True)
    assert apply_reward_transform("answer_f1", episode) == pytest.approx(paid["f1"])


def test_em_and_f1_follow_squad():
    assert exact_match("the Beatles", ["Beatles"]) == 1.0
    assert exact_match("Beatles band", ["Beatles"]) == 0.0
    assert token_f1("Beatles band", ["The Beatles"]) == pytest.approx(2 / 3)


# -- the expert ------------------------------------------------------------------------------------
def test_expert_answers_only_what_it_retrieved_and_solves_most_of_a_fixed_sample():
    env = SearchEnv()
    expert = SearchExpert(env)
    n = len(embedded_questions("test"))
    sample = range(0, n, 4)
    solved = 0
    for task_id in sample:
        obs, info = env.reset(options={"task_id": task_id})
        seen: list[str] = []
        for _ in range(10):
            action = expert(obs, info)
            if action.startswith("<answer>") and action != "<answer>unknown</answer>":
                answer = action[len("<answer>") : -len("</answer>")]
                assert any(contains_answer(text, answer) for text in seen)  # never one it has not read
            obs, _, terminated, _, info = env.step(action)
            seen += [h.contents for h in env.last_hits] if obs.startswith("<information>") else []
            if terminated:
                break
        solved += bool(info.get("success"))
    assert solved / len(sample) >= 0.6
    # multi-hop questions take several searches
    env.reset(options={"task_id": n - 1})  # the last test question is a 3-hop one
    assert len(env.question.hops) == 3


# -- a user's corpus and questions -------------------------------------------------------------------
def test_a_users_corpus_and_questions_by_path(tmp_path, monkeypatch):
    corpus, test, train = write_user_data(tmp_path)
    env = SearchEnv(corpus=str(corpus), test=str(test), train=str(train))
    obs, info = env.reset(options={"task_id": 2})  # test first, then train
    assert obs == "Question: How many moons does Quenta have?" and info["category"] == "toy-count"
    obs, *_ = env.step("<search>Quenta moons</search>")
    assert "Doc 1(Title: Quenta) Quenta is a gas giant with eleven moons" in obs
    assert env.step("<answer>11</answer>")[1] == 1.0

    # the same through the environment variables, which every process reads (the plugin: for the
    # splits): the README's example, run as a user would
    env_vars = {
        **os.environ,
        "AGENTGYM_SEARCH_CORPUS": str(corpus),
        "AGENTGYM_SEARCH_TEST": str(test),
        "AGENTGYM_SEARCH_TRAIN": str(train),
    }
    envs = agentgym_cli("envs", "--json", env=env_vars)
    assert envs.returncode == 0, envs.stderr
    spec = next(e for e in json.loads(envs.stdout) if e["name"] == "search")
    assert spec["splits"]["test"]["categories"] == {"toy-1hop": 2} and spec["splits"]["train"]["size"] == 1
    report = tmp_path / "r.json"
    recall = agentgym_cli("search", "check", "--corpus", str(corpus), "--questions", str(test), "--json")
    assert recall.returncode == 0, recall.stderr
    assert json.loads(recall.stdout)["categories"]["toy-1hop"] == {"n": 2, "question": 1.0, "hops": None}
    run = agentgym_cli(
        "eval",
        "--env",
        "search",
        "--split",
        "test",
        "--policy",
        "scripted",
        "--output",
        str(report),
        env=env_vars,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(report.read_text())["envs"]["search"]["success"] == 1.0


def agentgym_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentgym", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_an_id_past_the_last_question_is_refused_not_wrapped(tmp_path):
    n_test, n_train = len(embedded_questions("test")), len(embedded_questions("train"))
    last = n_test + n_train - 1
    env = agentgym.make("search")
    env.reset(options={"task_id": last})
    with pytest.raises(UnknownTaskError) as exc:
        env.reset(options={"task_id": last + 1})
    valid = f"valid test 0..{n_test - 1}, train {n_test}..{last}"
    assert str(exc.value) == f"unknown task id {last + 1} for search: {valid}"
    assert (exc.value.code, exc.value.status) == ("unknown_task", 422)
    assert env.task_id == last and env.step("<search>moon</search>")[4]["valid_action"]
    # a user's questions: their own ids, whatever the spec (made from the environment) says
    corpus, test, train = write_user_data(tmp_path)
    mine = agentgym.make("search", corpus=str(corpus), test=str(test), train=str(train))
    for task_id in (3, 100):
        with pytest.raises(
            UnknownTaskError, match=f"^unknown task id {task_id} for search: valid test 0..1, train 2$"
        ):
            mine.reset(options={"task_id": task_id})


def test_its_original_clients_reset_of_an_unknown_task_is_a_json_error_and_keeps_the_session():
    """AgentGym-RL's SearchQA client: /create answers the bare id, /reset names the task ``id``;
    the refusal over v1 is the kit's."""
    with serve_in_thread(["search"]) as url, httpx.Client(base_url=url, timeout=60) as c:
        sid = c.post("/create", json={"id": 0}).json()
        r = c.post("/reset", json={"env_idx": sid, "id": 10**6})
        assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_task", r.text
        assert r.json()["error"]["message"].startswith("unknown task id 1000000 for search: valid test 0..")
        assert c.post("/reset", json={"env_idx": sid, "id": 7}).status_code == 200
        assert c.get("/observation", params={"env_idx": sid}).status_code == 200


def test_questions_from_parquet(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    corpus, _, _ = write_user_data(tmp_path)
    path = tmp_path / "q.parquet"
    pq.write_table(pa.Table.from_pylist(QUESTIONS), path)
    env = SearchEnv(corpus=str(corpus), test=str(path), train=str(path))
    assert env.reset(options={"task_id": 1})[0].endswith("Kestrel Observatory?")


def test_bad_data_files_fail_with_the_path_and_line(tmp_path):
    from agentgym_search.corpus import CorpusError

    bad = tmp_path / "q.jsonl"
    bad.write_text(json.dumps({"question": "x", "golden_answers": "y"}) + "\n{not json\n")
    with pytest.raises(CorpusError, match=r"q\.jsonl:2: not JSON"):
        SearchEnv(test=str(bad)).reset(options={"task_id": 0})
    with pytest.raises(CorpusError, match="no such file"):
        SearchData(corpus=str(tmp_path / "missing.jsonl")).load_corpus()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(CorpusError, match="no passages"):
        Corpus.from_jsonl(empty)
    with pytest.raises(CorpusError, match="golden_answers"):
        bad.write_text(json.dumps({"question": "x", "golden_answers": []}) + "\n")
        SearchEnv(test=str(bad)).reset(options={"task_id": 0})


def test_a_named_data_set_from_a_plugin(tmp_path, monkeypatch):
    from agentgym import hookimpl

    corpus, test, train = write_user_data(tmp_path)

    class ToyData:
        @hookimpl
        def agentgym_datasets(self):
            return {"toy": SearchData(corpus=str(corpus), test=[str(test)], train=[str(train)])}

    registry = get_registry()
    registry.register(ToyData(), "toy-data")
    try:
        env = SearchEnv(data="toy")
        assert env.reset(options={"task_id": 0})[0] == "Question: Who discovered Zorblat?"
        with pytest.raises(UnknownNameError, match="toy"):
            SearchEnv(data="nope")
    finally:
        registry.unregister("toy-data")


def test_unknown_retriever_lists_the_known_ones():
    env = SearchEnv(retriever="nope")
    env.reset(options={"task_id": 0})
    with pytest.raises(UnknownNameError, match="bm25.*dense.*http|known"):
        env.step("<search>x</search>")


# -- retrievers -----------------------------------------------------------------------------------
def test_bm25_index_is_cached_by_corpus_content(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGYM_SEARCH_CACHE", str(tmp_path / "cache"))
    corpus_path, _, _ = write_user_data(tmp_path)
    corpus = Corpus.from_jsonl(corpus_path)
    first = BM25Retriever(corpus)
    again = BM25Retriever(Corpus.from_jsonl(corpus_path))
    assert not first.loaded_from_cache and again.loaded_from_cache
    q = ["Who discovered the moon Zorblat?"]
    assert first.search(q, 2) == again.search(q, 2)
    assert first.search(q, 2)[0][0].title == "Zorblat"
    assert len(first.search(q, 50)[0]) <= len(PASSAGES)  # k beyond the corpus is clipped
    # a changed corpus gets its own index
    corpus_path.write_text(
        corpus_path.read_text() + json.dumps({"id": "9", "contents": '"X"\nnew text'}) + "\n"
    )
    assert not BM25Retriever(Corpus.from_jsonl(corpus_path)).loaded_from_cache
    assert len(list((tmp_path / "cache").glob("bm25*"))) == 2


def test_concurrent_queries_are_batched():
    class Counting:
        """The real BM25 retriever, made slow enough that queries pile up behind a running call."""

        def __init__(self, inner):
            self.inner, self.sizes = inner, []

        def search(self, queries, k):
            self.sizes.append(len(queries))
            time.sleep(0.02)
            return self.inner.search(queries, k)

    from agentgym_search.data import shared_corpus

    counting = Counting(BM25Retriever(shared_corpus("embedded")))
    batcher = Batcher(counting)
    questions = [q.question for q in embedded_questions("test")[:64]]
    results: dict[int, list] = {}

    def ask(i: int) -> None:
        results[i] = batcher.search(questions[i], 3)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counting.sizes) == 64 and len(counting.sizes) < 32 and max(counting.sizes) > 1
    # each caller got its own query's answer
    for i in (0, 17, 63):
        assert results[i] == counting.inner.search([questions[i]], 3)[0]


@pytest.fixture
def retrieval_server(tmp_path):
    """``agentgym search serve-retriever`` over a user's corpus, as a real process on loopback."""
    corpus, _, _ = write_user_data(tmp_path)
    port = free_port()
    env = {**os.environ, "AGENTGYM_SEARCH_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym",
            "search",
            "serve-retriever",
            "--corpus",
            str(corpus),
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"serve-retriever exited: {proc.stderr.read().decode()}")
            time.sleep(0.1)
        yield url, tmp_path
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_env_over_http_against_serve_retriever(retrieval_server):
    url, folder = retrieval_server
    # the protocol itself, as Search-R1's clients call it
    r = httpx.post(
        url + "/retrieve",
        json={"queries": ["Zorblat discovered", "glass bells"], "topk": 2, "return_scores": True},
    )
    assert r.status_code == 200
    rows = r.json()["result"]
    assert rows[0][0]["document"]["contents"].startswith('"Zorblat"\n') and rows[0][0]["score"] > 0
    assert rows[1][0]["document"]["id"] == "4"
    plain = httpx.post(url + "/retrieve", json={"queries": ["Quenta"], "topk": 1}).json()["result"]
    assert set(plain[0][0]) == {"id", "contents"}
    bad = httpx.post(url + "/retrieve", json={"queries": [], "topk": 3})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    assert httpx.get(url + "/health").json()["passages"] == len(PASSAGES)  # still serving

    # the env, pointed at it (its own questions; the corpus lives in the server)
    _, test, train = write_user_data(folder)
    env = SearchEnv(retriever="http", retriever_options={"url": url}, test=str(test), train=str(train))
    env.reset(options={"task_id": 1})
    obs, *_ = env.step("<search>Kestrel Observatory mountain</search>")
    assert obs.startswith(
        "<information>Doc 1(Title: Kestrel Observatory) The Kestrel Observatory stands on Mount Arrow"
    )
    assert env.step("<answer>Mount Arrow</answer>")[1] == 1.0


def test_http_retriever_reports_a_dead_server_as_an_error():
    from agentgym_search.retrievers import RetrieverError

    retriever = HTTPRetriever(url=f"http://127.0.0.1:{free_port()}", timeout=2)
    with pytest.raises(RetrieverError, match="retrieval server"):
        retriever.search(["x"], 3)
    with pytest.raises(RetrieverError, match="needs a url"):
        HTTPRetriever(url="")


# -- the commands ---------------------------------------------------------------------------------
def test_check_and_index_commands():
    index = agentgym_cli("search", "index")
    assert index.returncode == 0 and "bm25:" in index.stdout and "passages" in index.stdout, index.stderr
    check = agentgym_cli("search", "check", "--limit", "30", "--json")
    assert check.returncode == 0, check.stderr
    figures = json.loads(check.stdout)
    assert figures["k"] == 3 and figures["categories"]["all"]["n"] == 30
    assert 0.5 <= figures["categories"]["all"]["question"] <= 1.0
    bad = agentgym_cli("search", "check", "--retriever", "nope")
    assert bad.returncode == 1 and bad.stderr.strip().startswith("agentgym: error:") and "nope" in bad.stderr
