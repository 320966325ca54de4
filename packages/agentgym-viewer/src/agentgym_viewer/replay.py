"""Episode pages: turn-by-turn replay, frames, token view.

- ``/episode/<eid>`` (``?turn=k``, 1-based, or ``?turn=all``): the episode's facts, its prompt, and
  one turn (or every turn): the model's output with the parsed action highlighted, the
  observation, the reward, the running return, timings, the env's picture after the turn.
- ``/episode/<eid>/frame/<k>.png``: the picture after turn k (0: the initial state), recorded or
  re-created by replaying the episode (:mod:`agentgym_viewer.frames`).
- ``/episode/<eid>/tokens``: the token sequence a trainer saw, trained tokens marked.

Recorded text goes through :mod:`agentgym_viewer.text` on its way to a page.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from agentgym_viewer import frames as frames_mod
from agentgym_viewer.render import error_page, render
from agentgym_viewer.text import highlight, visible
from agentgym_viewer.tokens import token_rows

#: Siblings listed under "Same task elsewhere" at most.
MAX_SIBLINGS = 50


def _number(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.4g}" if math.isfinite(x) else str(x)
    return str(x)


def _seconds(s: Any) -> str:
    try:
        s = float(s)
    except (TypeError, ValueError):
        return visible(s)
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def episode_url(eid: str, **query: Any) -> str:
    url = f"/episode/{quote(str(eid), safe='')}"
    query = {k: v for k, v in query.items() if v is not None}
    return f"{url}?{urlencode(query)}" if query else url


def _facts(meta: dict[str, Any], episode: Any) -> list[tuple[str, str]]:
    run = meta.get("run") or meta.get("path") or meta.get("file") or "—"
    return [
        ("Run", visible(run)),
        ("Env", visible(episode.env)),
        ("Task", visible(episode.task_id)),
        ("Split", visible(episode.split or meta.get("split") or "—")),
        ("Step", _number(meta.get("step"))),
        ("Category", visible(episode.category or meta.get("category") or "—")),
        ("Policy", visible(episode.policy or meta.get("policy") or "—")),
        ("Return", _number(episode.return_)),
        ("Success", "yes" if episode.success else "no"),
        ("Termination", visible(episode.termination or "—")),
        ("Turns", str(len(episode.steps))),
    ]


def _prompt(episode: Any) -> tuple[str, str]:
    """The system message(s), and the first observation (the first user message)."""
    system = "\n\n".join(m.content for m in episode.messages if m.role == "system")
    first_user = next((m.content for m in episode.messages if m.role == "user"), "")
    return visible(system), visible(first_user)


def _turn(episode: Any, k: int, initial: str) -> dict[str, Any]:
    step = episode.steps[k - 1]
    before = initial if k == 1 else visible(episode.steps[k - 2].observation)
    running = math.fsum(s.reward for s in episode.steps[:k])
    last = k == len(episode.steps)
    return {
        "k": k,
        "before": before,
        "segments": highlight(step.raw_output, step.action),
        "action": visible(step.action) if step.action is not None else None,
        "valid": bool(step.info.get("valid_action", True)),
        "observation": visible(step.observation),
        "reward": _number(step.reward),
        "running": _number(running),
        "timings": [(visible(name), _seconds(s)) for name, s in step.timings.items()],
        "terminated": step.terminated,
        "truncated": step.truncated,
        "last": last,
    }


async def _load(index: Any, eid: str) -> tuple[dict[str, Any], Any] | None:
    try:
        return await run_in_threadpool(index.episode, eid)
    except (KeyError, LookupError, FileNotFoundError, ValueError):
        return None


def _siblings(index: Any, eid: str) -> list[dict[str, Any]]:
    try:
        siblings = list(index.siblings(eid))
    except (KeyError, LookupError):
        return []
    out = []
    for s in siblings[:MAX_SIBLINGS]:
        where = s.get("run") or Path(str(s.get("path") or s.get("file") or "")).name or "file"
        kind = s.get("kind") or "episode"
        step = f" step {s['step']}" if s.get("step") is not None else ""
        sample = f", sample {s['sample']}" if s.get("sample") else ""
        outcome = "success" if s.get("success") else "failure"
        label = f"{where}: {kind}{step}{sample} — {outcome}, return {_number(s.get('return'))}"
        out.append({"label": visible(label), "href": "/compare?" + urlencode({"a": eid, "b": s.get("id")})})
    return out


def _chosen_turns(request: Request, n: int) -> tuple[bool, int] | Response:
    """``?turn=``: (show every turn, the turn shown), or the error page for a bad one."""
    turn_arg = request.query_params.get("turn", "1")
    if turn_arg == "all":
        return True, 1
    try:
        current = int(turn_arg)
    except ValueError:
        return error_page(request, 400, f"Turn {turn_arg!r} is not a number or 'all'.")
    if n and not 1 <= current <= n:
        return error_page(request, 404, f"No turn {current}: the episode has {n} turn(s).")
    return False, current


async def _frames_of(meta: dict[str, Any], episode: Any, turns: list[dict[str, Any]]) -> str | None:
    """Mark which of ``turns`` have a picture after and before them; why there are none, if so."""
    frames = await run_in_threadpool(frames_mod.frames_for, meta, episode)
    frame_count = 0 if isinstance(frames, str) else len(frames)
    for t in turns:
        t["frame"] = t["k"] < frame_count or frames_mod.recorded_frame(episode, t["k"]) is not None
        t["frame_before"] = t["k"] - 1 < frame_count
    return frames if isinstance(frames, str) else None


def _links(eid: str, episode: Any, current: int, show_all: bool) -> dict[str, Any]:
    """The episode page's links: turn to turn, frames, tokens, compare, play."""
    n = len(episode.steps)
    return {
        "base": episode_url(eid),
        "prev_url": episode_url(eid, turn=current - 1) if not show_all and current > 1 else None,
        "next_url": episode_url(eid, turn=current + 1) if not show_all and current < n else None,
        "turn_links": [(k, episode_url(eid, turn=k)) for k in range(1, n + 1)],
        "all_url": episode_url(eid, turn="all"),
        "frame_url": lambda k: f"{episode_url(eid)}/frame/{k}.png",
        "compare_url": "/compare?" + urlencode({"a": eid}),
        "play_url": "/play?" + urlencode({"env": episode.env, "task": episode.task_id}),
    }


async def _named_episode(request: Request) -> tuple[str, dict[str, Any], Any] | Response:
    """The episode the path names, as (its id, its index row, the episode), or the not-found page."""
    eid = request.path_params["eid"]
    loaded = await _load(request.app.state.index, eid)
    if loaded is None:
        return error_page(request, 404, f"No episode {eid!r}.")
    return eid, *loaded


async def episode_page(request: Request) -> Response:
    named = await _named_episode(request)
    if isinstance(named, Response):
        return named
    eid, meta, episode = named
    n = len(episode.steps)
    chosen = _chosen_turns(request, n)
    if isinstance(chosen, Response):
        return chosen
    show_all, current = chosen
    system, initial = _prompt(episode)
    shown = range(1, n + 1) if show_all else [current] if n else []
    turns = [_turn(episode, k, initial) for k in shown]
    frames_reason = await _frames_of(meta, episode, turns)
    return render(
        request,
        "episode.html",
        eid=eid,
        meta=meta,
        episode=episode,
        active="episodes",
        facts=_facts(meta, episode),
        error=visible(episode.error) if episode.error else None,
        system=system,
        initial=initial,
        turns=turns,
        n=n,
        current=current,
        show_all=show_all,
        frames_reason=visible(frames_reason) if frames_reason else None,
        tokens_url=f"{episode_url(eid)}/tokens" if meta.get("has_tokens") else None,
        siblings=_siblings(request.app.state.index, eid),
        **_links(eid, episode, current, show_all),
    )


async def frame(request: Request) -> Response:
    eid, k = request.path_params["eid"], request.path_params["k"]
    loaded = await _load(request.app.state.index, eid)
    if loaded is None:
        return PlainTextResponse(f"No episode {eid!r}.", status_code=404)
    meta, episode = loaded
    n = len(episode.steps)
    if k > n:
        return PlainTextResponse(f"No turn {k}: the episode has {n} turn(s).", status_code=404)
    png = frames_mod.recorded_frame(episode, k)
    if png is None:
        frames = await run_in_threadpool(frames_mod.frames_for, meta, episode)
        if isinstance(frames, str):
            return PlainTextResponse(f"Frames not available: {frames}.", status_code=404)
        if k >= len(frames):
            why = (
                f"only the first {frames_mod.MAX_TURNS} turns are replayed"
                if k > frames_mod.MAX_TURNS
                else "the env failed at that turn when the episode was played"
            )
            return PlainTextResponse(f"No frame after turn {k}: {why}.", status_code=404)
        png = frames[k]
    # The picture of a recorded turn never changes: let the browser keep it.
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})


async def tokens_page(request: Request) -> Response:
    named = await _named_episode(request)
    if isinstance(named, Response):
        return named
    eid, meta, episode = named
    if episode.tokens is None:
        return error_page(request, 404, f"Episode {eid!r} has no token sequence.")
    try:
        path = request.app.state.index.tokenizer_path(eid)
    except (KeyError, LookupError):
        path = None
    tokens, note = await run_in_threadpool(token_rows, episode.tokens, path)
    trained = sum(1 for m in episode.tokens.loss_mask if m)
    return render(
        request,
        "tokens.html",
        eid=eid,
        meta=meta,
        active="episodes",
        has_logprobs=episode.tokens.logprobs is not None,
        tokens=tokens,
        trained=trained,
        total=len(episode.tokens.ids),
        note=note,
        from_text=bool(episode.tokens_from_text),
        episode_url=episode_url(eid),
    )


routes: list[BaseRoute] = [
    Route("/episode/{eid}", episode_page, name="episode"),
    Route("/episode/{eid}/frame/{k:int}.png", frame, name="episode_frame"),
    Route("/episode/{eid}/tokens", tokens_page, name="episode_tokens"),
]
