"""Episode pages: turn-by-turn replay, frames, token view.

- ``/episode/<eid>`` (``?turn=k``, 1-based, or ``?turn=all``): the episode's facts, its prompt, and
  one turn (or every turn): the model's output with the parsed action highlighted, the
  observation, the reward, the running return, timings, the env's picture after the turn.
- ``/episode/<eid>/frame/<k>.png``: the picture after turn k (0: the initial state), recorded or
  re-created by replaying the episode (:mod:`agentgym_viewer.frames`).
- ``/episode/<eid>/tokens``: the token sequence a trainer saw, trained tokens marked.

Data is shown as text, never as markup: templates autoescape, and the highlighted output is a list
of ``(text, is_action)`` segments the template wraps, so no recorded text reaches ``|safe``.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from agentgym_viewer import frames as frames_mod

#: Siblings listed under "Same task elsewhere" at most.
MAX_SIBLINGS = 50

# C0 controls (but tab and newline), DEL: drawn as their Unicode control pictures, so a model's
# garbage output shows what it holds instead of vanishing (or breaking the page's text).
_CONTROLS = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)} | {0x7F: 0x2421, 0x0D: 0x240D}
_LABEL = re.compile(r"action[ \t]*[*_]*[ \t]*\d*[ \t]*[:：]", re.I)
_TAG = re.compile(r"^<(\w+)>(.*)</\1>$", re.S)


def visible(text: Any) -> str:
    """Text safe to put in a page as text: controls made visible, lone surrogates (from a bad
    decode) replaced so encoding the response cannot fail."""
    s = "" if text is None else str(text)
    return s.translate(_CONTROLS).encode("utf-8", "replace").decode("utf-8")


def _words_pattern(action: str) -> re.Pattern[str] | None:
    words = action.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words), re.I)


def find_action(output: str, action: str | None) -> tuple[int, int] | None:
    """Where ``action`` stands in ``output``: the first occurrence after the first ``Action:``
    label (the one parsers read), else the first anywhere. Parsers normalise spacing and case,
    so words match across any whitespace, in any case. A tags action (``<search>q</search>``)
    is found by its content when the tags were written differently."""
    if not action:
        return None
    candidates = [action]
    tag = _TAG.match(action)
    if tag:
        candidates.append(tag.group(2))
    label = _LABEL.search(output)
    after = label.end() if label else 0
    for candidate in candidates:
        pattern = _words_pattern(candidate)
        if pattern is None:
            continue
        matches = list(pattern.finditer(output))
        if matches:
            best = next((m for m in matches if m.start() >= after), matches[0])
            return best.start(), best.end()
    return None


def highlight(output: str, action: str | None) -> list[tuple[str, bool]]:
    """``output`` as ``(text, is_action)`` segments, the action's span marked."""
    span = find_action(output, action)
    if span is None:
        return [(visible(output), False)] if output else []
    start, end = span
    parts = [(output[:start], False), (output[start:end], True), (output[end:], False)]
    return [(visible(text), mark) for text, mark in parts if text]


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


def _not_found(request: Request, message: str, status: int = 404) -> Response:
    from agentgym_viewer.app import render

    title = "Bad request" if status == 400 else "Not found"
    return render(request, "error.html", status_code=status, status=status, title=title, detail=message)


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


def routes(index: Any) -> list[BaseRoute]:
    """The episode pages over ``index``."""

    async def episode_page(request: Request) -> Response:
        from agentgym_viewer.app import render

        eid = request.path_params["eid"]
        loaded = await _load(index, eid)
        if loaded is None:
            return _not_found(request, f"No episode {eid!r}.")
        meta, episode = loaded
        n = len(episode.steps)
        turn_arg = request.query_params.get("turn", "1")
        show_all = turn_arg == "all"
        current = 1
        if not show_all:
            try:
                current = int(turn_arg)
            except ValueError:
                return _not_found(request, f"Turn {turn_arg!r} is not a number or 'all'.", 400)
            if n and not 1 <= current <= n:
                return _not_found(request, f"No turn {current}: the episode has {n} turn(s).")
        system, initial = _prompt(episode)
        if show_all:
            turns = [_turn(episode, k, initial) for k in range(1, n + 1)]
        else:
            turns = [_turn(episode, current, initial)] if n else []
        frames = await run_in_threadpool(frames_mod.frames_for, meta, episode)
        frames_reason = frames if isinstance(frames, str) else None
        frame_count = 0 if isinstance(frames, str) else len(frames)
        for t in turns:
            t["frame"] = t["k"] < frame_count or frames_mod.recorded_frame(episode, t["k"]) is not None
            t["frame_before"] = t["k"] - 1 < frame_count
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
            base=episode_url(eid),
            prev_url=episode_url(eid, turn=current - 1) if not show_all and current > 1 else None,
            next_url=episode_url(eid, turn=current + 1) if not show_all and current < n else None,
            turn_links=[(k, episode_url(eid, turn=k)) for k in range(1, n + 1)],
            all_url=episode_url(eid, turn="all"),
            frames_reason=visible(frames_reason) if frames_reason else None,
            frame_url=lambda k: f"{episode_url(eid)}/frame/{k}.png",
            tokens_url=f"{episode_url(eid)}/tokens" if meta.get("has_tokens") else None,
            compare_url="/compare?" + urlencode({"a": eid}),
            play_url="/play?" + urlencode({"env": episode.env, "task": episode.task_id}),
            siblings=_siblings(index, eid),
        )

    async def frame(request: Request) -> Response:
        eid, k = request.path_params["eid"], request.path_params["k"]
        loaded = await _load(index, eid)
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
        from agentgym_viewer.app import render

        eid = request.path_params["eid"]
        loaded = await _load(index, eid)
        if loaded is None:
            return _not_found(request, f"No episode {eid!r}.")
        meta, episode = loaded
        if episode.tokens is None:
            return _not_found(request, f"Episode {eid!r} has no token sequence.")
        try:
            path = index.tokenizer_path(eid)
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

    return [
        Route("/episode/{eid}", episode_page, name="episode"),
        Route("/episode/{eid}/frame/{k:int}.png", frame, name="episode_frame"),
        Route("/episode/{eid}/tokens", tokens_page, name="episode_tokens"),
    ]


@functools.lru_cache(maxsize=4)
def _tokenizer(path: str, mtime: float) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def token_rows(
    tokens: Any, tokenizer_path: Path | str | None
) -> tuple[list[tuple[str, bool, str]], str | None]:
    """Each token as ``(text, trained, title)``, and a note when texts could not be decoded.

    One ``decode_batch`` call decodes every id on its own, in Rust: thousands of tokens in a few
    milliseconds, where a Python loop of ``decode`` calls would dominate the page."""
    ids = list(tokens.ids)
    mask = list(tokens.loss_mask)
    logprobs = tokens.logprobs
    texts: list[str] | None = None
    note = None
    if tokenizer_path is not None and Path(tokenizer_path).is_file():
        try:
            p = Path(tokenizer_path)
            tok = _tokenizer(str(p), p.stat().st_mtime)
            texts = tok.decode_batch([[i] for i in ids], skip_special_tokens=False)
        except Exception as exc:  # noqa: BLE001 - a bad tokenizer file: show the ids instead
            note = f"The tokenizer could not decode these ids ({type(exc).__name__}: {exc}); ids shown."
    else:
        note = "No tokenizer.json in the run's model folder; ids shown."
    rows = []
    for j, token_id in enumerate(ids):
        trained = bool(mask[j]) if j < len(mask) else False
        text = visible(texts[j]) if texts is not None else f"{token_id} "
        title = f"#{j} id {token_id}"
        if trained and logprobs is not None and j < len(logprobs):
            title += f" logprob {logprobs[j]:.4f}"
        if tokens.reward_index == j:
            title += " (reward)"
        rows.append((text, trained, title))
    return rows, visible(note) if note else None
