"""Benchmark: the trajectory viewer's index and pages on a synthetic run of 100,000 episodes.

    python -m bench.speed.viewer [--steps 200] [--per-step 500] [--repeat 5] [--keep DIR]

1. Writes a native-looking run in a temporary folder (or ``--keep DIR``): ``config.yaml``,
   ``metrics.jsonl`` (a row per step), ``report.json`` (validation points) and ``--steps`` files
   ``episodes/step_NNNNNN.jsonl`` of ``--per-step`` episodes each (default 200 x 500 = 100,000):
   4 envs, 4-10 turns per episode, each turn's model output and observation 200-600 characters of
   generated words (about 9 KB a line, ~0.9 GB in all). The word ``door`` is in about half of the
   observations; ``zanzibar`` is in the observations of 3 episodes of the last step file only.
2. Times the index: the first open (an empty ``AGENTGYM_VIEWER_CACHE``: every file read and
   parsed), then a second open of the same folder (unchanged files: nothing read).
3. Serves the viewer over HTTP (``serve_in_thread``, uvicorn on loopback) and requests each page
   ``--repeat`` times: ``/``, ``/run/<id>``, ``/episodes`` (first page, env + success=no, sorted by
   -return, page 1000), a text search for a common and for a rare word, ``/episode/<id>`` (the
   replay page: its status is reported, 404 if it is not there), ``/compare``. The first request
   of each is cold (the index's per-version caches are empty). A text search scans for at most
   0.5 s per request and keeps its progress: the rare word's first request is reported alone, with
   how many requests ("Continue searching") it took to scan every episode.

Prints one JSON object (seconds; per page p50/max/first and the HTTP status), then
``ratio slowest_page/1s: X`` (the slowest page's max over one second). A benchmark, not a test: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common.findings import Findings

ENVS = {
    "babyai": ["GoTo", "Pickup", "Open", "Unlock"],
    "textcraft": ["depth1", "depth2", "depth3"],
    "sciworld": ["boil", "melt", "grow-plant", "find-animal"],
    "search": ["nq", "hotpotqa", "triviaqa"],
}
WORDS = (
    "the a you see key ball box red blue green yellow purple grey wall room left right front steps "
    "move forward turn pick up go to open locked unlocked carrying nothing goal reach craft planks "
    "stick table furnace inventory search query result passage answer kettle water stove heat melt "
    "thought reason plan next action valid invalid because therefore maybe first then"
).split()
RARE = "zanzibar"
COMMON = "door"


def text(rng: random.Random, low: int, high: int, extra: str | None = None) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    size = 0
    while size < target:
        w = rng.choice(WORDS)
        words.append(w)
        size += len(w) + 1
    if extra is not None:
        words.insert(rng.randrange(len(words)), extra)
    return " ".join(words)


def episode(rng: random.Random, step: int, i: int, rare: bool) -> dict:
    env = rng.choice(list(ENVS))
    n = rng.randint(4, 10)
    success = rng.random() < min(0.9, 0.1 + step / 250)
    steps, messages = (
        [],
        [
            {"role": "system", "content": text(rng, 300, 500)},
            {"role": "user", "content": text(rng, 200, 600)},
        ],
    )
    for t in range(n):
        action = f"{rng.choice(['go to', 'pick up', 'open', 'craft', 'search'])} {rng.choice(WORDS)}"
        raw = f"Thought: {text(rng, 150, 500)}\nAction: {action}"
        obs = text(rng, 200, 600, COMMON if rng.random() < 0.5 else None)
        if rare and t == n - 1:
            obs += f" {RARE}"
        last = t == n - 1
        reward = 1.0 if (last and success) else 0.0
        info = {"success": success} if last else {}
        steps.append(
            {
                "raw_output": raw,
                "action": action,
                "observation": obs,
                "reward": reward,
                "terminated": last and success,
                "truncated": False,
                "info": info,
                "timings": {"generate": round(rng.random() * 0.05, 4)},
            }
        )
        messages += [{"role": "assistant", "content": raw}, {"role": "user", "content": obs}]
    return {
        "schema_version": 2,
        "env": env,
        "task_id": rng.randrange(5000),
        "split": "train",
        "category": rng.choice(ENVS[env]),
        "policy": "hf",
        "seed": None,
        "max_turns": n,
        "messages": messages,
        "steps": steps,
        "return": sum(s["reward"] for s in steps) + round(rng.random(), 3),
        "success": success,
        "num_turns": n,
        "termination": "success" if success else rng.choice(["max_turns", "failure", "format_error"]),
        "error": None,
        "tokens": None,
        "sample": i % 8,
        "reflections": [],
        "context_full": False,
        "tokens_from_text": False,
        "group": i // 8,
    }


def make_run(root: Path, steps: int, per_step: int) -> Path:
    run = root / "runs" / "bench"
    (run / "episodes").mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    (run / "config.yaml").write_text(
        "name: bench\nalgorithm: grpo\nmodel: synthetic\nhorizon: scaling_inter\nenvs: [babyai, textcraft]\n"
    )
    with open(run / "metrics.jsonl", "w") as f:
        for s in range(1, steps + 1):
            row = {
                "step": s,
                "horizon": 5 + s // 40,
                "return": rng.random() + s / steps,
                "success": min(0.9, 0.1 + s / 250),
                "turns": 6.5,
                "kl": rng.random() * 1e-3 * s,
                "entropy": 2.0 - s / steps + rng.random() * 0.1,
                "tokens_per_s": 1000 + rng.random() * 200,
            }
            f.write(json.dumps(row) + "\n")
    validation = [
        {"step": s, "label": str(s), "success": min(0.9, 0.1 + s / 250)} for s in range(0, steps + 1, 50)
    ]
    (run / "report.json").write_text(json.dumps({"steps": steps, "validation": validation}))
    for s in range(1, steps + 1):
        rare_at = set(rng.sample(range(per_step), 3)) if s == steps else set()
        with open(run / "episodes" / f"step_{s:06d}.jsonl", "w") as f:
            for i in range(per_step):
                f.write(json.dumps(episode(rng, s, i, i in rare_at), separators=(",", ":")) + "\n")
    return run


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def time_page(client: httpx.Client, url: str, repeat: int) -> dict:
    times, status = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        r = client.get(url)
        times.append(time.perf_counter() - t)
        status = r.status_code
    return {
        "url": url.removeprefix(str(client.base_url)),
        "status": status,
        "first": round(times[0], 4),
        "p50": round(statistics.median(times), 4),
        "max": round(max(times), 4),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="step files (default: 200)")
    ap.add_argument("--per-step", type=int, default=500, help="episodes per step file (default: 500)")
    ap.add_argument("--repeat", type=int, default=5, help="requests per page (default: 5)")
    ap.add_argument("--keep", type=Path, default=None, help="write (or reuse) the run here and keep it")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="agentgym-viewer-bench-"))
    root = args.keep or tmp
    os.environ["AGENTGYM_VIEWER_CACHE"] = str(tmp / "cache")
    from agentgym_viewer.index import Index
    from agentgym_viewer.server import serve_in_thread

    out: dict = {"episodes": args.steps * args.per_step}
    try:
        t = time.perf_counter()
        run = root / "runs" / "bench"
        if not (run / "episodes" / f"step_{args.steps:06d}.jsonl").is_file():
            run = make_run(root, args.steps, args.per_step)
        out["generate_s"] = round(time.perf_counter() - t, 2)
        out["data_mb"] = round(sum(p.stat().st_size for p in (run / "episodes").iterdir()) / 1e6, 1)

        t = time.perf_counter()
        index = Index([root / "runs"])
        out["index_build_s"] = round(time.perf_counter() - t, 2)
        out["indexed"] = sum(r.episodes for r in index.runs())
        out["index_db_mb"] = round(index.db_path.stat().st_size / 1e6, 1)
        index.close()
        t = time.perf_counter()
        index = Index([root / "runs"])
        out["index_reopen_s"] = round(time.perf_counter() - t, 3)

        run_id = index.runs()[0].id
        first = index.query(run=run_id, per_page=1).rows[0]["id"]
        sibling = index.siblings(first)
        other = sibling[0]["id"] if sibling else first
        pages = {
            "runs": "/",
            "run": f"/run/{run_id}",
            "episodes": "/episodes",
            "filtered": "/episodes?env=babyai&success=no",
            "sorted": "/episodes?sort=-return",
            "deep": "/episodes?page=1000",
            "search_common": f"/episodes?q={COMMON}",
            "search_rare": f"/episodes?q={RARE}",
            "episode": f"/episode/{first}",
            "compare": f"/compare?a={first}&b={other}",
        }
        out["pages"] = {}
        with serve_in_thread(index) as url, httpx.Client(base_url=url, timeout=120) as client:
            for name, path in pages.items():
                if name == "search_rare":
                    continue
                out["pages"][name] = time_page(client, url + path, args.repeat)
            # the rare word: the first request scans for its time budget, each "continue" resumes
            times = []
            while True:
                t0 = time.perf_counter()
                html = client.get(url + pages["search_rare"]).text
                times.append(time.perf_counter() - t0)
                if "Continue searching" not in html or len(times) > 200:
                    break
            out["pages"]["search_rare"] = {
                "url": pages["search_rare"],
                "status": 200,
                "first": round(times[0], 4),
                "p50": round(statistics.median(times), 4),
                "max": round(max(times), 4),
                "requests_to_scan_all": len(times),
                "total_s": round(sum(times), 3),
                "found": html.count('href="/episode/'),
            }
        index.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    served = {k: v for k, v in out["pages"].items() if v["status"] == 200}
    slowest = max(served.values(), key=lambda v: v["max"])
    out["slowest_page"] = slowest["url"]
    findings = Findings()
    findings.show(out)
    findings.value("slowest_page/1s", slowest["max"] / 1.0)


if __name__ == "__main__":
    main()
