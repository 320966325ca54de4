"""Run every benchmark in bench/ and write one dated summary.

    python -m bench.all [--quick] [--only NAME,...] [--skip NAME,...] [--out bench/results] [--list]
    hatch run bench:all --quick

Each benchmark runs as a subprocess of this interpreter (one after another, so that they do not
share the machine), with its own settings: the defaults of each script, or with ``--quick`` short
ones (about ten minutes in all on a 2-core machine). Each writes its findings to a JSON file this
names (``bench/common/findings.py``): its result, its ratios, and the ratios it withheld with why
(a comparison whose two sides did not do the same work, or had errors:
``bench/common/equal_work.py``); this reads them, never the output, and writes
``<out>/<YYYY-MM-DD>.json`` (every benchmark's command, status, seconds, JSON, ratios and withheld
ratios with the reason) and ``<out>/<YYYY-MM-DD>.md`` (a table: benchmark, key figures, ratio,
baseline; a withheld ratio shows as "no ratio" with its reason). A benchmark that fails or runs
past its time limit is recorded as such (with the end of its output) and the others still run.

Not run here: ``bench.speed.verl_step`` (needs the ``verl`` environment: ``hatch run verl:python -m
bench.speed.verl_step``), the other experiments (``bench/experiments/``: ``demo_dev`` and ``scaling_inter`` (they train the demo's models:
tens of minutes each, and the real-model drivers, up to hours) and the real-model speed benchmarks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common.findings import ENV as FINDINGS_ENV
from bench.common.procs import machine

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


@dataclass
class Bench:
    name: str
    script: str  # its module, run as ``python -m`` from the checkout's root
    args: list[str] = field(default_factory=list)  # full settings (the script's defaults)
    quick: list[str] = field(default_factory=list)  # --quick settings
    figures: list[str] = field(default_factory=list)  # dotted paths into its JSON for the table
    baseline: str = ""  # what its (first) ratio compares against
    timeout: float = 1800.0
    quick_timeout: float = 180.0
    needs: str | None = None  # a command that must be on PATH, else skipped


BENCHES = [
    *(
        Bench(
            f"env_server[{env}]",
            "bench.speed.env_server",
            ["--env", env] + (["--group", "8"] if env == "babyai" else []),
            ["--env", env, "--duration", "2", "--sessions", "1,64", "--trajectories", "32", "--groups", "1"]
            + (["--group", "8"] if env == "babyai" else []),
            [
                "in_process.steps_per_s",
                "in_process_lockstep.64.steps_per_s",
                "http_batched.64.steps_per_s",
                "http_single.64.steps_per_s",
                "http_batched.64.client_us_per_step",
            ]
            + (["in_process_grpo.steps_per_s"] if env == "babyai" else []),
            "in-process steps/s, one thread: the same 64 sessions in lockstep (@64), one env's episodes",
            quick_timeout=120,
        )
        for env in ("guess", "babyai", "textcraft")
    ),
    Bench(
        "rollout",
        "bench.speed.rollout",
        [],
        ["--episodes", "256", "--repeat", "3"],
        [
            "raw_loop.episodes_per_s",
            "rollout.episodes_per_s",
            "rollout_remote.episodes_per_s",
            "rollout_remote.errors",
        ],
        "raw env loop (rollout/raw); rollout engine in-process, 64 episodes (remote/in_process)",
    ),
    Bench(
        "train_speed",
        "bench.speed.train_speed",
        [],
        ["--tasks", "2", "--n", "4", "--max-turns", "4", "--repeats", "1"],
        ["sampling_s.ours_kv", "sampling_s.ours", "sampling_s.generate", "fwd_bwd_s.sampled_only"],
        "each part's baseline in the same run (see the ratio names)",
        quick_timeout=240,
    ),
    Bench(
        "search",
        "bench.speed.search",
        [],
        ["--sizes", "default", "--duration", "2", "--threads", "16"],
        [
            "bm25.default.one_by_one.queries_per_s",
            "bm25.default.batched.queries_per_s",
            "bm25.default.index_build_s",
            "server.rss_64_sessions_mb",
        ],
        "one query per retriever call; RSS with 1 session",
        quick_timeout=240,
    ),
    Bench(
        "webarena",
        "bench.speed.webarena",
        [],
        ["--duration", "5", "--sessions", "1,4"],
        [
            "runs.0.step_p50_ms",
            "runs.0.steps_per_s",
            "runs.-1.steps_per_s",
            "runs.0.cpu_ms_per_step",
            "runs.-1.cpu_ms_per_step",
            "runs.-1.pss_mb",
        ],
        "the 1-session run",
        quick_timeout=180,
    ),
    Bench(
        "viewer",
        "bench.speed.viewer",
        [],
        ["--steps", "50", "--per-step", "200", "--repeat", "3"],
        ["index_build_s", "index_reopen_s", "indexed"],
        "1 s per page (the slowest page's max)",
        quick_timeout=180,
    ),
    Bench(
        "textcraft",
        "bench.speed.textcraft",
        [],
        ["--resets", "2000", "--baseline-resets", "20"],
        [
            "agentgym.reset_ms.median",
            "textcraft_pkg.reset_ms.median",
            "agentgym.steps_per_s",
            "expert.test.rate",
        ],
        "the textcraft package's own reset, same run",
        quick_timeout=150,
    ),
    Bench(
        "sciworld",
        "bench.speed.sciworld",
        [],
        ["--steps", "100", "--workers", "1", "--wrapper-steps", "10"],
        [],
        "scienceworld called directly, same JVM flags",
        quick_timeout=240,
        needs="java",
    ),
    Bench(
        "babyai_expert",
        "bench.experiments.babyai_expert",
        [],
        ["--train", "100", "--budgets", "20"],
        ["test @20.rate", "train @20.rate", "seconds"],
        "(success rates, no ratio)",
        quick_timeout=120,
    ),
]


def read_findings(path: Path) -> dict:
    """What a benchmark wrote of its findings (``bench/common/findings.py``; what it had found so far
    if it failed or ran out of time), the file then removed; empty if it wrote nothing."""
    try:
        text = path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)
    return json.loads(text) if text else {}


def dig(obj: object, path: str) -> object:
    for part in path.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.lstrip("-").isdigit() and -len(obj) <= int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return None
    return obj


def leaves(obj: object, prefix: str = "") -> list[tuple[str, float]]:
    """Numeric leaves, depth first (the fallback key figures)."""
    out: list[tuple[str, float]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out.append((prefix, obj))
    return out


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def key_figures(b: Bench, data: dict | None, limit: int = 4) -> str:
    if data is None:
        return ""
    picked = [(p, dig(data, p)) for p in b.figures]
    picked = [(p, v) for p, v in picked if v is not None and not isinstance(v, (dict, list))]
    if not picked:
        picked = [(p, v) for p, v in leaves(data) if "ratio" not in p][:limit]
    return "; ".join(f"{p}={fmt(v)}" for p, v in picked)


def run_one(b: Bench, quick: bool, python: str) -> dict:
    cmd = [python, "-m", b.script, *(b.quick if quick else b.args)]
    shown = " ".join(["python", "-m", b.script, *(b.quick if quick else b.args)])
    record: dict = {"name": b.name, "command": shown, "baseline": b.baseline}
    if b.needs and shutil.which(b.needs) is None:
        record.update(status="skipped", reason=f"{b.needs} not on PATH")
        return record
    limit = b.quick_timeout if quick else b.timeout
    print(f"-- {b.name}: {shown}", flush=True)
    t0 = time.perf_counter()
    findings_file = tempfile.NamedTemporaryFile(prefix="findings-", suffix=".json", delete=False)
    findings_file.close()
    findings_path = Path(findings_file.name)
    try:
        proc = subprocess.run(
            cmd,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=limit,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1", FINDINGS_ENV: str(findings_path)},
        )
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
        status = "ok" if rc == 0 else "failed"
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        rc, status = None, "timeout"
    seconds = time.perf_counter() - t0
    found = read_findings(findings_path)
    data, ratios, no_ratios = found.get("result"), found.get("ratios", {}), found.get("no_ratios", {})
    record.update(
        status=status,
        returncode=rc,
        seconds=round(seconds, 1),
        ratios=ratios,
        no_ratios=no_ratios,
        result=data,
    )
    if status != "ok":
        record["output_tail"] = (out[-1500:] + "\n" + err[-2500:]).strip()
    shown_ratios = [f"{k}: {v}" for k, v in ratios.items()] + [f"{k}: no ratio" for k in no_ratios]
    print(f"   {status} in {seconds:.0f}s; " + ", ".join(shown_ratios), flush=True)
    return record


def markdown(day: str, meta: dict, records: list[dict]) -> str:
    lines = [
        f"# Benchmarks, {day}",
        "",
        f"`python -m bench.all{' --quick' if meta['quick'] else ''}` on {meta['machine']}; "
        f"{meta['seconds']:.0f} s in all. Figures from one run on a shared machine: noisy.",
        "",
        "| benchmark | key figures | ratio | baseline |",
        "|---|---|---|---|",
    ]
    for r in records:
        if r["status"] != "ok":
            why = r.get("reason") or (f"exit {r['returncode']}" if r["status"] == "failed" else "time limit")
            tail = [line.strip() for line in (r.get("output_tail") or "").splitlines() if line.strip()]
            if tail:
                why += f": `{tail[-1][:160]}`"
            figures = f"**{r['status']}** ({why})"
        else:
            figures = key_figures(next(b for b in BENCHES if b.name == r["name"]), r.get("result"))
        shown = [f"{k}: {v:.3g}" for k, v in (r.get("ratios") or {}).items()]
        shown += [f"{k}: **no ratio** ({why[:200]})" for k, why in (r.get("no_ratios") or {}).items()]
        ratios = "<br>".join(shown).replace("|", "\\|") or "-"
        cells = [f"`{r['name']}`", figures.replace("|", "\\|"), ratios, r["baseline"]]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Commands:", ""]
    lines += [f"- `{r['name']}`: `{r['command']}` ({r.get('seconds', 0)} s)" for r in records]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short settings (about ten minutes in all)")
    ap.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    ap.add_argument("--skip", default="", help="comma-separated benchmark names to leave out")
    ap.add_argument("--out", type=Path, default=BENCH / "results", help="folder for the results")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and their commands, run none")
    args = ap.parse_args(argv)
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    skip = {n.strip() for n in args.skip.split(",") if n.strip()}
    names = {b.name for b in BENCHES} | {b.script.rsplit(".", 1)[-1] for b in BENCHES}
    unknown = (only | skip) - names
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))} (known: {', '.join(sorted(names))})")
    chosen = [
        b
        for b in BENCHES
        if (not only or b.name in only or b.script.rsplit(".", 1)[-1] in only)
        and b.name not in skip
        and b.script.rsplit(".", 1)[-1] not in skip
    ]
    if args.list:
        for b in chosen:
            print(f"{b.name}: python -m {b.script} {' '.join(b.quick if args.quick else b.args)}")
        return 0
    t0 = time.perf_counter()
    records = [run_one(b, args.quick, sys.executable) for b in chosen]
    day = dt.date.today().isoformat()
    meta = {
        "date": day,
        "quick": args.quick,
        "machine": machine(),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{day}.json").write_text(json.dumps({**meta, "benchmarks": records}, indent=2) + "\n")
    (args.out / f"{day}.md").write_text(markdown(day, meta, records))
    print(f"wrote {args.out / day}.json and .md in {meta['seconds']:.0f}s")
    return 0 if all(r["status"] in ("ok", "skipped") for r in records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
