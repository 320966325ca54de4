"""Pages over the index: runs, one run (its curves drawn by :mod:`~agentgym_viewer.charts`), the
episodes table, compare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Route

from agentgym.trajectory import Episode
from agentgym_viewer.charts import chart, metric_points
from agentgym_viewer.index import SORTS, Index
from agentgym_viewer.index.scan import number
from agentgym_viewer.render import render

if TYPE_CHECKING:
    from agentgym_viewer.index import RunInfo

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


def runs_page(request: Request) -> Response:
    index: Index = request.app.state.index
    return render(request, "runs.html", active="runs", runs=index.runs(), roots=index.roots)


def _curve(report: dict[str, Any], rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """The run's greedy learning curve (``curve_every``): the report's points (the starting model's
    among them) and, while the run goes on, the ``curve_success`` of its metrics rows."""
    points = {}
    for p in report.get("curve") or []:
        if isinstance(p, dict) and number(p.get("step")) is not None and number(p.get("success")) is not None:
            points[float(p["step"])] = float(p["success"])
    for r in rows:
        if number(r.get("curve_success")) is not None and number(r.get("step")) is not None:
            points[float(r["step"])] = float(r["curve_success"])
    return sorted(points.items())


def _run_charts(
    index: Index,
    run_id: str,
    rows: list[dict[str, Any]],
    validation: list[dict],
    curve: list[tuple[float, float]],
) -> list[dict]:
    """A trainer's run curves (success with its validation points and greedy learning curve),
    then success per env from its training episodes."""
    charts = []
    for key, title in CURVES:
        series = [(title, metric_points(rows, key))]
        dots = []
        y_range = None
        if key == "success":
            y_range = (0.0, 1.0)
            dots = [("Validation", [(float(p["step"]), p["success"]) for p in validation])]
            if not dots[0][1]:
                dots = []
            if curve:  # a line of its own: greedy on a fixed subset, not the sampled validation
                series.append(("Greedy curve (test subset)", curve))
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
    return charts


def _run_facts(info: RunInfo) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The run's facts (algorithm, model...), and an evaluation report's results per env."""
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
    return facts, eval_envs


def run_page(request: Request) -> Response:
    index: Index = request.app.state.index
    run_id = request.path_params["run_id"]
    try:
        info = index.run(run_id)
    except KeyError:
        raise HTTPException(404, f"There is no run {run_id!r}.") from None
    rows = index.metrics(run_id)
    trained = info.backend in ("native", "verl")
    validation = index.validation(run_id) if trained else []
    facts, eval_envs = _run_facts(info)
    return render(
        request,
        "run.html",
        active="runs",
        run=info,
        facts=facts,
        charts=_run_charts(index, run_id, rows, validation, _curve(info.report, rows)) if trained else [],
        validation=validation,
        plots=index.plots(run_id),
        eval_envs=eval_envs,
        last=rows[-1] if rows else None,
    )


def plot_file(request: Request) -> Response:
    index: Index = request.app.state.index
    path = index.plot_path(request.path_params["run_id"], request.path_params["name"])
    if path is None:
        raise HTTPException(404, "There is no such plot.")
    return FileResponse(path)


def _episode_filters(request: Request) -> dict[str, Any]:
    """The episodes table's filters from the query string, as :meth:`Index.query` takes them."""
    return {
        "run": _arg(request, "run"),
        "env": _arg(request, "env"),
        "split": _arg(request, "split"),
        "kind": _arg(request, "kind"),
        "step": _int_arg(request, "step", "Step"),
        "category": _arg(request, "category"),
        "success": {"yes": True, "no": False}.get(_arg(request, "success") or ""),
        "termination": _arg(request, "termination"),
        "task_id": _int_arg(request, "task", "Task"),
    }


def _table_headers(sort: str) -> list[dict[str, Any]]:
    """The episodes table's column headers; a sortable one links to its sort (reversed when on)."""
    headers: list[dict[str, Any]] = []
    for label in ("Run", "Step", "Env", "Task", "Category", "Split", "Return", "Turns", "Success"):
        key = SORTABLE.get(label)
        if key is None:
            headers.append({"label": label})
            continue
        aria = "ascending" if sort == key else "descending" if sort == f"-{key}" else None
        headers.append({"label": label, "sort": f"-{key}" if sort == key else key, "aria": aria})
    headers.append({"label": "Termination"})
    return headers


def episodes_page(request: Request) -> Response:
    index: Index = request.app.state.index
    filters = _episode_filters(request)
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

    runs = index.runs()
    return render(
        request,
        "episodes.html",
        active="episodes",
        page=result,
        values=index.filter_values(filters["run"]),
        runs=runs,
        current=current,
        text=text,
        headers=_table_headers(sort),
        prev_url=url(page=page_no - 1 if page_no > 2 else None) if result.has_prev else None,
        next_url=url(page=page_no + 1) if result.has_next else None,
        again_url=url(page=page_no if page_no > 1 else None),
        run_info=next((r for r in runs if r.id == filters["run"]), None),
    )


def compare_page(request: Request) -> Response:
    index: Index = request.app.state.index
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
        sides=[{"meta": m, "episode": e, "turns": turns(e), "first": first_observation(e)} for m, e in sides],
        a=meta_a,
        b=sides[1][0] if len(sides) > 1 else None,
        siblings=index.siblings(meta_a["id"]),
    )


routes: list[BaseRoute] = [
    Route("/", runs_page, name="runs"),
    Route("/run/{run_id}", run_page, name="run"),
    Route("/run/{run_id}/plots/{name}", plot_file, name="plot"),
    Route("/episodes", episodes_page, name="episodes"),
    Route("/compare", compare_page, name="compare"),
]
