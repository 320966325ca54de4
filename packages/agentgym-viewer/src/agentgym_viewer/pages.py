"""Pages over the index: runs, one run (curves as server-drawn SVG), the episodes table, compare.

Curves are drawn here as SVG coordinates and the templates write them out: no chart library, no
script, nothing for the Content-Security-Policy to allow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Route

from agentgym.trajectory import Episode
from agentgym_viewer.app import render
from agentgym_viewer.index import SORTS, Index

#: the curves of a run page: (metrics.jsonl key, title)
CURVES = (
    ("return", "Return"),
    ("success", "Success"),
    ("horizon", "Horizon"),
    ("kl", "KL"),
    ("entropy", "Entropy"),
    ("tokens_per_s", "Tokens/s"),
)
FILTERS = ("run", "env", "split", "kind", "step", "category", "success", "termination", "task", "q")
#: sortable columns of the episodes table: header -> sort key
SORTABLE = {"Step": "step", "Task": "task", "Return": "return", "Turns": "turns"}
PER_PAGE = 50


# -- charts ------------------------------------------------------------------------------------
def _ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """About ``n`` round values covering [lo, hi] (whole numbers only if ``integer``: steps)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1, round(step))
    first = math.ceil(lo / step - 1e-9) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    return out


def _label(v: float, step: float | None = None) -> str:
    """A tick or point label; with ``step`` (the tick spacing) as many decimals as it needs, so
    neighbouring ticks never read the same."""
    if step:
        step = round(abs(step), 12)  # a difference of two ticks: 0.0001 may come out 0.0000999...
    if step and 1e-4 <= step < 1 and abs(v) < 1e6:
        decimals = max(0, -math.floor(math.log10(step)))
        if round(step, decimals) != step:
            decimals += 1  # 0.25
        return f"{v:,.{decimals}f}"
    if v == int(v) and abs(v) < 1e6:
        return f"{int(v):,}"
    return f"{v:.3g}"


def _tick_labels(values: list[float], scale: Callable[[float], float]) -> list[tuple[float, str]]:
    step = values[1] - values[0] if len(values) > 1 else None
    return [(scale(v), _label(v, step)) for v in values]


def chart(
    key: str,
    title: str,
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    dots: Sequence[tuple[str, Sequence[tuple[float, float]]]] = (),
    y_range: tuple[float, float] | None = None,
    width: int = 520,
    height: int = 220,
) -> dict[str, Any]:
    """Coordinates of a line chart (steps on x): polylines, dots, ticks and a legend."""
    left, right, top, bottom = 56, width - 12, 12, height - 30
    points = [p for _, pts in (*series, *dots) for p in pts]
    out: dict[str, Any] = {"id": f"chart-{key}", "title": title, "width": width, "height": height}
    if not points:
        return {**out, "empty": True}
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = y_range if y_range else (min(ys), max(ys))
    y0, y1 = min(y0, min(ys)), max(y1, max(ys))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        pad = abs(y0) * 0.1 or 0.5
        y0, y1 = y0 - pad, y1 + pad

    def sx(x: float) -> float:
        return round(left + (x - x0) / (x1 - x0) * (right - left), 1)

    def sy(y: float) -> float:
        return round(bottom - (y - y0) / (y1 - y0) * (bottom - top), 1)

    lines = []
    for i, (label, pts) in enumerate(series):
        if not pts:
            continue
        lines.append(
            {
                "label": label,
                "cls": f"series-{i % 6}",
                "points": " ".join(f"{sx(x)},{sy(y)}" for x, y in pts),
                # one point makes no line: mark every point of short series
                "marks": [(sx(x), sy(y), f"{label}: step {_label(x)}, {_label(y)}") for x, y in pts]
                if len(pts) <= 40
                else [],
            }
        )
    markers = []
    for label, pts in dots:
        for x, y in pts:
            markers.append((sx(x), sy(y), f"{label}: step {_label(x)}, {_label(y)}"))
    return {
        **out,
        "empty": False,
        "box": {"left": left, "right": right, "top": top, "bottom": bottom},
        "xticks": _tick_labels([v for v in _ticks(x0, x1, 6, integer=True) if x0 <= v <= x1], sx),
        "yticks": _tick_labels([v for v in _ticks(y0, y1, 5) if y0 <= v <= y1], sy),
        "lines": lines,
        "dots": markers,
        "dots_label": dots[0][0] if dots else None,
        "legend": len(lines) > 1 or bool(markers),
    }


def _series(rows: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    pts = []
    for row in rows:
        x, y = row.get("step"), row.get(key)
        if isinstance(x, int | float) and isinstance(y, int | float) and not isinstance(y, bool):
            if math.isfinite(float(y)):
                pts.append((float(x), float(y)))
    return pts


# -- helpers -----------------------------------------------------------------------------------
def _arg(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    value = value.strip() if value is not None else None
    return value or None


def _int_arg(request: Request, name: str, what: str) -> int | None:
    value = _arg(request, name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise HTTPException(400, f"{what} must be a whole number, not {value!r}") from None


def _episode_or_404(index: Index, eid: Any) -> tuple[dict[str, Any], Episode]:
    try:
        return index.episode(int(eid))
    except (KeyError, ValueError, TypeError):
        raise HTTPException(404, f"There is no episode {eid}.") from None


def split_action(raw: str, action: str | None) -> tuple[str, str, str]:
    """``raw`` as (before, action, after) around the last place the parsed action appears, for
    highlighting; (raw, "", "") when it does not appear verbatim."""
    if action:
        at = raw.rfind(action)
        if at >= 0:
            return raw[:at], action, raw[at + len(action) :]
    return raw, "", ""


def turns(episode: Episode) -> list[dict[str, Any]]:
    """What a page shows of each turn."""
    out = []
    for i, step in enumerate(episode.steps, 1):
        before, action, after = split_action(step.raw_output, step.action)
        out.append(
            {
                "n": i,
                "raw": step.raw_output,
                "before": before,
                "highlight": action,
                "after": after,
                "action": step.action,
                "observation": step.observation,
                "reward": step.reward,
                "valid": step.valid_action,
                "terminated": step.terminated,
                "truncated": step.truncated,
            }
        )
    return out


def first_observation(episode: Episode) -> str | None:
    """The first user message (the task as the model saw it)."""
    for m in episode.messages:
        if m.role == "user":
            return m.content
    return None


# -- pages -------------------------------------------------------------------------------------
def routes(index: Index) -> list[BaseRoute]:
    """The pages of this module."""

    def runs_page(request: Request) -> Response:
        return render(request, "runs.html", active="runs", runs=index.runs(), roots=index.roots)

    def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            info = index.run(run_id)
        except KeyError:
            raise HTTPException(404, f"There is no run {run_id!r}.") from None
        rows = index.metrics(run_id)
        validation = index.validation(run_id) if info.backend in ("native", "verl") else []
        charts = []
        if info.backend in ("native", "verl"):
            for key, title in CURVES:
                series = [(title, _series(rows, key))]
                dots = []
                y_range = None
                if key == "success":
                    y_range = (0.0, 1.0)
                    dots = [("Validation", [(float(p["step"]), p["success"]) for p in validation])]
                    if not dots[0][1]:
                        dots = []
                charts.append(chart(key, f"{title} per step", series, dots, y_range=y_range))
            per_env = index.per_env_success(run_id)
            charts.append(
                chart(
                    "env-success",
                    "Success per env (training episodes)",
                    [(env, [(float(s), r) for s, r in pts]) for env, pts in sorted(per_env.items())],
                    y_range=(0.0, 1.0),
                )
            )
        facts = []
        for key in ("algorithm", "model", "horizon"):
            value = info.config.get(key, info.report.get(key))
            if value not in (None, "", {}):
                facts.append((key.capitalize(), value))
        eval_envs = []
        if info.backend == "eval" and isinstance(info.report.get("envs"), dict):
            eval_envs = [(env, r) for env, r in info.report["envs"].items() if isinstance(r, dict)]
            for key in ("policy", "strategy", "model"):
                if info.report.get(key) not in (None, ""):
                    facts.append((key.capitalize(), info.report[key]))
        return render(
            request,
            "run.html",
            active="runs",
            run=info,
            facts=facts,
            charts=charts,
            validation=validation,
            plots=index.plots(run_id),
            eval_envs=eval_envs,
            last=rows[-1] if rows else None,
        )

    def plot_file(request: Request) -> Response:
        path = index.plot_path(request.path_params["run_id"], request.path_params["name"])
        if path is None:
            raise HTTPException(404, "There is no such plot.")
        return FileResponse(path)

    def episodes_page(request: Request) -> Response:
        run = _arg(request, "run")
        filters = {
            "run": run,
            "env": _arg(request, "env"),
            "split": _arg(request, "split"),
            "kind": _arg(request, "kind"),
            "step": _int_arg(request, "step", "Step"),
            "category": _arg(request, "category"),
            "success": {"yes": True, "no": False}.get(_arg(request, "success") or ""),
            "termination": _arg(request, "termination"),
            "task_id": _int_arg(request, "task", "Task"),
        }
        text = _arg(request, "q")
        sort = _arg(request, "sort") or "step"
        if sort not in SORTS:
            raise HTTPException(400, f"Unknown sort {sort!r}.")
        page_no = max(1, _int_arg(request, "page", "Page") or 1)
        per_page = min(500, max(1, _int_arg(request, "per_page", "Per page") or PER_PAGE))
        result = index.query(**filters, text=text, sort=sort, page=page_no, per_page=per_page)
        current = {k: _arg(request, k) for k in FILTERS}
        current["sort"] = sort if sort != "step" else None
        current["per_page"] = str(per_page) if per_page != PER_PAGE else None

        def url(**changes: Any) -> str:
            params = {**current, **changes}
            return "/episodes?" + urlencode({k: v for k, v in params.items() if v not in (None, "")})

        headers = []
        for label in ("Run", "Step", "Env", "Task", "Category", "Split", "Return", "Turns", "Success"):
            key = SORTABLE.get(label)
            if key is None:
                headers.append({"label": label})
                continue
            aria = "ascending" if sort == key else "descending" if sort == f"-{key}" else None
            headers.append({"label": label, "sort": f"-{key}" if sort == key else key, "aria": aria})
        headers.append({"label": "Termination"})
        runs = index.runs()
        return render(
            request,
            "episodes.html",
            active="episodes",
            page=result,
            values=index.filter_values(run),
            runs=runs,
            current=current,
            text=text,
            headers=headers,
            prev_url=url(page=page_no - 1 if page_no > 2 else None) if result.has_prev else None,
            next_url=url(page=page_no + 1) if result.has_next else None,
            again_url=url(page=page_no if page_no > 1 else None),
            run_info=next((r for r in runs if r.id == run), None),
        )

    def compare_page(request: Request) -> Response:
        a = _arg(request, "a")
        if a is None:
            raise HTTPException(400, "Choose an episode to compare: /compare?a=<id>&b=<id>.")
        meta_a, ep_a = _episode_or_404(index, a)
        b = _arg(request, "b")
        sides = [(meta_a, ep_a)]
        if b is not None:
            sides.append(_episode_or_404(index, b))
        return render(
            request,
            "compare.html",
            active="episodes",
            sides=[
                {"meta": m, "episode": e, "turns": turns(e), "first": first_observation(e)} for m, e in sides
            ],
            a=meta_a,
            b=sides[1][0] if len(sides) > 1 else None,
            siblings=index.siblings(meta_a["id"]),
        )

    return [
        Route("/", runs_page, name="runs"),
        Route("/run/{run_id}", run_page, name="run"),
        Route("/run/{run_id}/plots/{name}", plot_file, name="plot"),
        Route("/episodes", episodes_page, name="episodes"),
        Route("/compare", compare_page, name="compare"),
    ]
