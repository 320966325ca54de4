"""Benchmark: the search env's BM25 retriever, its Batcher, and an env server's memory per session.

    python -m bench.speed.search [--sizes default,100000] [--duration 3] [--threads 64] [--skip-server]
                           [--tolerance 0]

1. BM25 at each corpus size: the index build time, then every query one at a time (latency p50/p99,
   queries/s) and in batches of ``--batch`` (32) through one ``retriever.search`` call (batch latency
   p50/p99, amortised time per query, queries/s). ``default`` is the embedded corpus (~12.4k
   passages); a number N is a synthetic scale-up to N passages: the embedded passages repeated, copy
   ``r`` (r >= 1) of passage ``i`` having the words of its text shuffled by ``random.Random(f"{r}:{i}")``
   and `` (r)`` appended to its title, so every passage is distinct but the vocabulary (and so the
   query terms' selectivity) stays that of the embedded corpus. Its digest is derived from N and the
   embedded digest, so it never shares a cache key with a real corpus. Indexes are built with
   ``cache=False``, and ``AGENTGYM_SEARCH_CACHE`` points at a temporary folder throughout, so the
   user's index cache is neither read nor written.
   Queries: the embedded test questions and their hop sub-questions (deduplicated), top-3, timed
   after one untimed batched pass over them all (PyStemmer caches stems: a cold first pass is slower).
2. The Batcher at each size: ``--threads`` threads each sending one query at a time through one
   Batcher for ``--duration`` seconds, vs 1 thread, and vs the same threads calling the retriever
   directly (no Batcher: its lock serialises them); queries/s and retriever calls (batching factor =
   queries / calls).
3. Resident memory (VmRSS) of one ``agentgym serve search`` process (one worker: sessions on threads
   in that process), started with an empty temporary index cache: idle after start, after one
   session with one search (the corpus loaded, the index built), and after 64 sessions with one
   search each; the per-extra-session MB is their difference over 63.

Prints one JSON object, then ``ratio batched/one_by_one queries_per_s (<size>): X`` for each size and
``ratio rss_64_sessions/rss_1_session: X``.

Each side's work is counted as it is done (``work`` in the JSON): one by one and batched, the
queries answered, the hits returned, the retriever calls and the errors (a call that raised); the
server's two points, the sessions opened, the searches made, the sessions ``/health`` reports open
and the errors (a refused request). A ratio is printed only when neither side had an error and the
work agrees within ``--tolerance`` (default 0, exact: BM25 answers the same queries the same way),
else ``no ratio ...: not the same work (...)``: for the queries, the queries and hits; for the
memory ratio, whose sides hold 1 and 64 sessions by design, the work per session (searches and open
sessions per session opened).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import tempfile
import threading
import time

import httpx
from agentgym_search.corpus import Corpus, Passage
from agentgym_search.data import embedded_questions
from agentgym_search.retrievers import Batcher, BM25Retriever

from agentgym.server.background import serve_in_process
from bench.common.equal_work import differences
from bench.common.findings import Findings
from bench.common.procs import rss_mb

TOPK = 3
SERVER_SESSIONS = 64


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def queries() -> list[str]:
    """The embedded test questions and their hops' questions, deduplicated, in order."""
    seen: dict[str, None] = {}
    for q in embedded_questions("test"):
        seen.setdefault(q.question, None)
        for hop in q.hops:
            text = str(hop.get("question", "")).strip()
            if text:
                seen.setdefault(text, None)
    return list(seen)


def scaled_corpus(base: Corpus, n: int) -> Corpus:
    """``n`` distinct passages from ``base`` (see the module docstring)."""
    passages: list[Passage] = []
    size = len(base)
    for j in range(n):
        r, i = divmod(j, size)
        p = base.passages[i]
        if r == 0:
            passages.append(Passage(str(j), p.title, p.text))
            continue
        words = p.text.split()
        random.Random(f"{r}:{i}").shuffle(words)
        passages.append(Passage(str(j), f"{p.title} ({r})", " ".join(words)))
    digest = hashlib.sha256(f"bench-synthetic:{n}:{base.digest}".encode()).hexdigest()
    return Corpus(passages, digest, f"synthetic ({n} passages from the embedded corpus)")


class Work:
    """Queries answered, hits returned, retriever calls made and calls that raised."""

    def __init__(self) -> None:
        self.queries = self.hits = self.calls = self.errors = 0

    def search(self, retriever: BM25Retriever, queries: list[str]) -> None:
        self.calls += 1
        try:
            rows = retriever.search(queries, TOPK)
        except Exception:  # noqa: BLE001 - counted: the side then did other work
            self.errors += 1
            return
        self.queries += len(rows)
        self.hits += sum(len(row) for row in rows)

    def dict(self) -> dict:
        return {"queries": self.queries, "hits": self.hits, "calls": self.calls, "errors": self.errors}


def bench_queries(retriever: BM25Retriever, qs: list[str], batch: int) -> dict:
    for start in range(0, len(qs), batch):  # warm up: the stemmer's cache, numpy, the CPU caches
        retriever.search(qs[start : start + batch], TOPK)
    single: list[float] = []
    one_work, batch_work = Work(), Work()
    t0 = time.perf_counter()
    for q in qs:
        t = time.perf_counter()
        one_work.search(retriever, [q])
        single.append(time.perf_counter() - t)
    one_total = time.perf_counter() - t0
    batches: list[float] = []
    t0 = time.perf_counter()
    for start in range(0, len(qs), batch):
        t = time.perf_counter()
        batch_work.search(retriever, qs[start : start + batch])
        batches.append(time.perf_counter() - t)
    batch_total = time.perf_counter() - t0
    return {
        "work": {"one_by_one": one_work.dict(), "batched": batch_work.dict()},
        "one_by_one": {
            "p50_ms": 1000 * percentile(single, 0.5),
            "p99_ms": 1000 * percentile(single, 0.99),
            "queries_per_s": len(qs) / one_total,
        },
        "batched": {
            "batch_size": batch,
            "batch_p50_ms": 1000 * percentile(batches, 0.5),
            "batch_p99_ms": 1000 * percentile(batches, 0.99),
            "per_query_ms": 1000 * batch_total / len(qs),
            "queries_per_s": len(qs) / batch_total,
        },
    }


def bench_threads(search, qs: list[str], threads: int, duration: float, batcher: Batcher | None) -> dict:
    """``threads`` threads, each calling ``search(query)`` in a loop for ``duration`` seconds."""
    counts = [0] * threads
    latencies: list[list[float]] = [[] for _ in range(threads)]
    stop = threading.Event()
    barrier = threading.Barrier(threads + 1)

    def worker(k: int) -> None:
        lat = latencies[k]
        j = k * 7
        barrier.wait()
        while not stop.is_set():
            t = time.perf_counter()
            search(qs[j % len(qs)])
            lat.append(time.perf_counter() - t)
            counts[k] += 1
            j += 1

    pool = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(threads)]
    for t in pool:
        t.start()
    calls0 = batcher.calls if batcher else 0
    barrier.wait()
    t0 = time.perf_counter()
    time.sleep(duration)
    stop.set()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0  # includes the calls in flight at the stop
    done = sum(counts)
    lat = [x for part in latencies for x in part]
    out = {
        "threads": threads,
        "queries_per_s": done / elapsed,
        "p50_ms": 1000 * percentile(lat, 0.5),
        "p99_ms": 1000 * percentile(lat, 0.99),
        "queries": done,
    }
    if batcher is not None:
        calls = batcher.calls - calls0
        out["retriever_calls"] = calls
        out["batching_factor"] = done / calls if calls else float("nan")
    return out


def bench_size(corpus: Corpus, qs: list[str], args) -> dict:
    t0 = time.perf_counter()
    retriever = BM25Retriever(corpus, cache=False)
    build_s = time.perf_counter() - t0
    result = {"passages": len(corpus), "index_build_s": build_s, **bench_queries(retriever, qs, args.batch)}
    batcher = Batcher(retriever)
    result["batcher"] = {
        "1_thread": bench_threads(lambda q: batcher.search(q, TOPK), qs, 1, args.duration, batcher),
        f"{args.threads}_threads": bench_threads(
            lambda q: batcher.search(q, TOPK), qs, args.threads, args.duration, batcher
        ),
        f"{args.threads}_threads_no_batcher": bench_threads(
            lambda q: retriever.search([q], TOPK), qs, args.threads, args.duration, None
        ),
    }
    return result


def bench_server(qs: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="agentgym-bench-search-server-") as cache:
        env = {**os.environ, "AGENTGYM_SEARCH_CACHE": cache}
        with serve_in_process(
            ["search"], "--capacity", "1024", "--max-instances", "1024", env=env, timeout=120
        ) as served:
            pid = served.proc.pid
            out: dict = {"rss_idle_mb": rss_mb(pid)}
            done = {"sessions": 0, "searches": 0, "errors": 0}
            with httpx.Client(base_url=served.url, timeout=300) as c:

                def session_with_search(i: int) -> float:
                    reply = c.post("/v1/sessions", json={"env": "search", "task_id": i})
                    if reply.is_error:
                        done["errors"] += 1
                        return float("nan")
                    done["sessions"] += 1
                    sid = reply.json()["session_id"]
                    t = time.perf_counter()
                    step = c.post(f"/v1/sessions/{sid}/step", json={"action": f"<search>{qs[i]}</search>"})
                    seconds = time.perf_counter() - t
                    if step.is_error:
                        done["errors"] += 1
                    else:
                        done["searches"] += 1
                    return seconds

                def work() -> dict:
                    """What the server holds so far: the counts, and its open sessions (``/health``)."""
                    health = c.get("/health")
                    w = {**done, "open": health.json().get("sessions") if not health.is_error else None}
                    for key in ("searches", "open"):
                        w[f"{key}_per_session"] = (
                            round(w[key] / w["sessions"], 3) if w[key] and w["sessions"] else 0
                        )
                    return w

                out["first_search_s"] = session_with_search(0)  # loads the corpus, builds the index
                out["rss_1_session_mb"] = rss_mb(pid)
                out["work"] = {"1_session": work()}
                for i in range(1, SERVER_SESSIONS):
                    session_with_search(i)
                out["rss_64_sessions_mb"] = rss_mb(pid)
                out["work"]["64_sessions"] = work()
                out["sessions"] = out["work"]["64_sessions"]["open"]
            extra = out["rss_64_sessions_mb"] - out["rss_1_session_mb"]
            out["per_extra_session_mb"] = extra / (SERVER_SESSIONS - 1)
            return out


def size_label(size: str) -> str:
    if size == "default":
        return "default corpus"
    n = int(size)
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def rounded(value):
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, float):
        return round(value, 3)
    return value


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes",
        default="default,100000",
        help="corpus sizes: 'default' (embedded) or a passage count (default: default,100000)",
    )
    ap.add_argument(
        "--duration", type=float, default=3.0, help="seconds per Batcher measurement (default: 3)"
    )
    ap.add_argument("--threads", type=int, default=64, help="concurrent Batcher callers (default: 64)")
    ap.add_argument("--batch", type=int, default=32, help="queries per batched search (default: 32)")
    ap.add_argument("--skip-server", action="store_true", help="skip the env server memory part")
    ap.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="relative difference allowed between two sides' work before their ratio is withheld "
        "(default: 0, exact: the same queries answered the same way)",
    )
    args = ap.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]

    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="agentgym-bench-search-") as cache:
        os.environ["AGENTGYM_SEARCH_CACHE"] = cache  # nothing below touches the user's cache
        qs = queries()
        base = Corpus.embedded()
        result: dict = {"queries": len(qs), "topk": TOPK, "duration_s": args.duration, "bm25": {}}
        for size in sizes:
            corpus = base if size == "default" else scaled_corpus(base, int(size))
            result["bm25"][size] = bench_size(corpus, qs, args)
        if not args.skip_server:
            result["server"] = bench_server(qs)
    result["total_s"] = time.perf_counter() - t_start

    result = rounded(result)
    result["tolerance"] = args.tolerance
    ratios, result["not_equal"] = [], {}
    for size in sizes:
        r = result["bm25"][size]
        label = f"batched/one_by_one queries_per_s ({size_label(size)})"
        w = r["work"]
        why = differences(
            w["batched"], w["one_by_one"], args.tolerance, ("batched", "one_by_one"), ("queries", "hits")
        )
        ratios.append((label, r["batched"]["queries_per_s"], r["one_by_one"]["queries_per_s"], why))
        result["not_equal"][label] = why
    if "server" in result:
        s = result["server"]
        label = "rss_64_sessions/rss_1_session"
        why = differences(
            s["work"]["64_sessions"],
            s["work"]["1_session"],
            args.tolerance,
            ("64 sessions", "1 session"),
            ("searches_per_session", "open_per_session"),
        )
        ratios.append((label, s["rss_64_sessions_mb"], s["rss_1_session_mb"], why))
        result["not_equal"][label] = why
    result["not_equal"] = {k: v for k, v in result["not_equal"].items() if v}
    findings = Findings()
    findings.show(result)
    for ratio in ratios:
        findings.ratio(*ratio)


if __name__ == "__main__":
    main()
