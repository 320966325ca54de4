"""Episode pages, frames, the token view and play, over HTTP against a real server (no browser).

The run is the conftest's: a native trainer run on BabyAI (train episodes with token sequences)
with the scripted expert's solved evaluation episodes beside it, plus an episodes file whose texts
try to inject markup.
"""

from __future__ import annotations

import html
import io
import re

import httpx
import pytest

from agentgym.trajectory import read_episodes


@pytest.fixture(scope="module")
def index(sample_run, hostile_episodes, tmp_path_factory):
    from agentgym_viewer.index import Index

    idx = Index([sample_run.parent, hostile_episodes], cache=tmp_path_factory.mktemp("viewer-cache"))
    yield idx
    idx.close()


@pytest.fixture(scope="module")
def client(index):
    from agentgym_viewer.server import serve_in_thread

    with serve_in_thread(index) as url, httpx.Client(base_url=url, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def expert_episode(index):
    """The longest solved expert episode: (meta, episode), at least two turns."""
    rows = index.query(kind="eval", success=True, sort="-turns").rows
    meta, episode = index.episode(rows[0]["id"])
    assert episode.env == "babyai" and episode.success and len(episode.steps) >= 2
    return meta, episode


def _text(page: str) -> str:
    """The page's text: tags dropped, entities decoded (what a person reads)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _links(page: str) -> dict[str, str]:
    """Link text -> href (the first link of each text)."""
    out: dict[str, str] = {}
    for href, inner in re.findall(r'<a href="([^"]*)"[^>]*>(.*?)</a>', page, re.S):
        out.setdefault(_text(inner).strip(), html.unescape(href))
    return out


def test_expert_episode_steps_through_its_turns(client, expert_episode):
    meta, episode = expert_episode
    n = len(episode.steps)
    first = client.get(f"/episode/{meta['id']}")
    assert first.status_code == 200
    page = first.text
    assert f"Episode {meta['id']}" in page
    assert f"Turn 1 of {n}" in page
    for label in ("Run", "Env", "Task", "Split", "Policy", "Return", "Success", "Termination", "Turns"):
        assert f"<dt>{label}</dt>" in page
    assert "<summary>Prompt</summary>" in page
    action = episode.steps[0].action
    assert f'<mark class="action">{html.escape(action)}</mark>' in page
    links = _links(page)
    assert "Previous turn" not in links
    assert "Compare" in links and links["Compare"] == f"/compare?a={meta['id']}"
    assert "All turns" in links
    assert f'alt="Frame after turn 1" src="/episode/{meta["id"]}/frame/1.png"' in page

    second = client.get(links["Next turn"])
    assert f"Turn 2 of {n}" in second.text
    back = client.get(_links(second.text)["Previous turn"])
    assert f"Turn 1 of {n}" in back.text

    last = client.get(f"/episode/{meta['id']}", params={"turn": n}).text
    assert f"Turn {n} of {n}" in last
    assert "Next turn" not in _links(last)
    assert "Termination: success" in _text(last)

    every = client.get(f"/episode/{meta['id']}", params={"turn": "all"}).text
    assert all(f"Turn {k} of {n}" in every for k in range(1, n + 1))
    # out of range and not a number: a page saying so, not a 500
    assert client.get(f"/episode/{meta['id']}", params={"turn": n + 1}).status_code == 404
    assert client.get(f"/episode/{meta['id']}", params={"turn": "x"}).status_code == 400
    assert client.get("/episode/999999").status_code == 404
    assert client.get("/episode/nope").status_code == 404


def test_same_task_elsewhere_links_to_compare(client, index):
    val = index.query(kind="val").rows[0]
    (expert,) = index.query(kind="eval", task_id=val["task_id"]).rows
    page = client.get(f"/episode/{expert['id']}").text
    assert '<h2 id="siblings">Same task elsewhere</h2>' in page
    assert f"/compare?a={expert['id']}&amp;b={val['id']}" in page


def test_frames_replay_the_episode(client, expert_episode):
    from PIL import Image

    import agentgym

    meta, episode = expert_episode
    n = len(episode.steps)
    env = agentgym.make("babyai")
    env.render_mode = "rgb_array"
    env.reset(options={"task_id": episode.task_id})
    height, width = env.render().shape[:2]
    env.close()

    images = []
    for k in (0, n):
        r = client.get(f"/episode/{meta['id']}/frame/{k}.png")
        assert r.status_code == 200 and r.headers["content-type"] == "image/png"
        image = Image.open(io.BytesIO(r.content))
        assert image.size == (width, height)
        images.append(image.convert("RGB").tobytes())
    assert images[0] != images[1]  # the agent moved
    missing = client.get(f"/episode/{meta['id']}/frame/{n + 1}.png")
    assert missing.status_code == 404 and "turn" in missing.text


def test_frames_of_an_env_that_does_not_render_say_why(client, index):
    (row,) = index.query(env="guess").rows
    page = client.get(f"/episode/{row['id']}").text
    assert "Frames: not available — env &#39;guess&#39; does not render pictures" in page
    assert "<img" not in page
    r = client.get(f"/episode/{row['id']}/frame/0.png")
    assert r.status_code == 404 and "does not render" in r.text


def test_a_diverging_replay_gives_no_frames(sample_run, tmp_path):
    from agentgym_viewer import frames

    episode = max(read_episodes(sample_run / "eval.episodes.jsonl"), key=lambda e: len(e.steps))
    episode.steps[1].observation = "not what the env says"
    reason = frames.frames_for({"id": "diverged", "path": str(tmp_path)}, episode)
    assert isinstance(reason, str) and "diverges from the recording at turn 2" in reason


def test_token_view_marks_the_trained_tokens(client, index):
    row = next(r for r in index.query(kind="train").rows if r["has_tokens"])
    _, episode = index.episode(row["id"])
    page = client.get(f"/episode/{row['id']}").text
    tokens_url = _links(page)["Token view"]
    r = client.get(tokens_url)
    assert r.status_code == 200
    trained = sum(episode.tokens.loss_mask)
    assert r.text.count('<span class="trained" title=') == trained
    assert r.text.count('<span title="#') + trained == len(episode.tokens.ids)
    assert f"trained: {trained} tokens of {len(episode.tokens.ids)}" in r.text
    assert "logprob" in r.text
    # texts decoded with the run's tokenizer, not ids
    assert "No tokenizer.json" not in r.text
    expert = index.query(kind="eval").rows[0]
    assert client.get(f"/episode/{expert['id']}/tokens").status_code == 404


def test_hostile_texts_are_escaped(client, index):
    (row,) = index.query(env="guess").rows
    for params in ({}, {"turn": "all"}):
        page = client.get(f"/episode/{row['id']}", params=params).text
        assert "<script" not in page.lower()
        assert "<img src=x" not in page
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page
        assert "window.pwned = 1</script>" in _text(page)


def _form_token(page: str) -> str:
    return re.search(r'name="form_token" value="([^"]+)"', page).group(1)


def test_play_by_hand_and_with_the_expert(client):
    start = client.get("/play")
    assert start.status_code == 200
    assert '<option value="babyai"' in start.text
    r = client.post("/play", data={"env": "babyai", "task": "0", "form_token": _form_token(start.text)})
    assert r.status_code == 303
    url = r.headers["location"]
    page = client.get(url).text
    assert "Playing babyai, task 0" in page
    assert "No moves yet." in page
    observation = re.search(r'<pre class="text observation">(.*?)</pre>', page, re.S).group(1)
    token = _form_token(page)
    assert client.get(url + "/frame.png").headers["content-type"] == "image/png"

    for move in ("turn left", "move forward"):
        r = client.post(url + "/step", data={"action": move, "form_token": token})
        assert r.status_code == 303 and r.headers["location"] == url
    page = client.get(url).text
    assert "<code>turn left</code>" in page and "<code>move forward</code>" in page
    assert "Turns: 2" in page
    now = re.search(r'<pre class="text observation">(.*?)</pre>', page, re.S).group(1)
    assert now != observation

    client.post(url + "/expert", data={"form_token": token})
    page = client.get(url).text
    assert "Turns: 3" in page and "<td>expert</td>" in page

    # the expert finishes the task
    for _ in range(60):
        if "Episode over" in page:
            break
        client.post(url + "/expert", data={"form_token": token})
        page = client.get(url).text
    assert "Episode over: success" in page
    assert "Play again" in _links(page)

    # a form without the session's token does nothing
    assert client.post(url + "/step", data={"action": "turn left"}).status_code == 403
    # a policy endpoint that is not there: a message on the page, not a 500
    r = client.post(url + "/policy", data={"endpoint": "nope", "model": "m", "form_token": token})
    assert r.status_code == 303
    assert "endpoint must be an http" in client.get(url).text

    assert client.post(url + "/end", data={"form_token": token}).status_code == 303
    assert client.get(url).status_code == 404


@pytest.fixture
def fake_policy():
    """An OpenAI-compatible endpoint on loopback answering every chat with the next of its replies;
    yields (base URL, the request bodies it got)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    replies = ["I will look around.\nAction: turn left", "no action in this one"]
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the stdlib's name
            bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            reply = replies[min(len(bodies), len(replies)) - 1]
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
            self.send_response(200 if self.path == "/v1/chat/completions" else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    server.shutdown()
    server.server_close()


def test_play_policy_moves(client, fake_policy):
    endpoint, bodies = fake_policy
    url = client.post(
        "/play", data={"env": "babyai", "task": "", "form_token": _form_token(client.get("/play").text)}
    )
    url = url.headers["location"]
    page = client.get(url).text
    assert "Playing babyai, task 400000" in page  # empty task: the env's first test task
    token = _form_token(page)
    form = {"endpoint": endpoint, "model": "tiny", "form_token": token}
    assert client.post(url + "/policy", data=form).status_code == 303
    page = client.get(url).text
    assert "Turns: 1" in page and "<td>policy</td>" in page and "<code>turn left</code>" in page
    messages = bodies[0]["messages"]
    assert bodies[0]["model"] == "tiny"
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"].startswith("Your goal:")
    # a reply without an action: a format error, as in a rollout; nothing sent to the env
    client.post(url + "/policy", data=form)
    page = client.get(url).text
    assert "Turns: 2" in page and "Format error: no action parsed" in page
    assert [m["role"] for m in bodies[1]["messages"]] == ["system", "user", "assistant", "user"]
    assert value_of(page, "play-endpoint") == endpoint  # remembered for the next ask
    # an endpoint that is not there: a message on the page, not a 500
    client.post(url + "/policy", data={**form, "endpoint": "http://127.0.0.1:9/v1"})
    assert "Policy move failed" in client.get(url).text


@pytest.mark.parametrize("format_hint", [False, True])
def test_play_shows_a_policy_what_a_rollout_shows_it(format_hint):
    """For the same moves on the same task, a play session's chat is, turn by turn, the messages a
    rollout sends its policy: the system prompt, observations (with the reminder under
    ``format_hint``), a move typed by hand as a reply in the parser's format, a reply that does not
    parse followed by the parser's complaint."""
    from agentgym_train.policies.base import BasePolicy, Generation
    from agentgym_train.rollout.engine import RolloutEngine, Task
    from agentgym_train.rollout.envs import LocalEnvs
    from agentgym_viewer.sessions import close_session, start_session, take_reply

    from agentgym.parsers import format_action
    from agentgym.plugins import get_env_spec

    spec = get_env_spec("babyai")
    task_id = spec.splits["test"].task_ids[0]
    replies = [format_action(spec.action_parser, "turn left"), "no action here", "Fine.\nAction: turn right"]
    seen: list[list[dict]] = []

    class Recorder(BasePolicy):
        name = "recorder"

        def generate(self, requests, sampling):
            (request,) = requests
            seen.append([dict(m) for m in request.messages])
            return [Generation(replies[min(len(seen), len(replies)) - 1])]

    engine = RolloutEngine(Recorder(), {"babyai": LocalEnvs(spec)}, max_turns=4, format_hint=format_hint)
    engine.run([Task("babyai", task_id)])

    session = start_session(spec, task_id)
    try:
        chats = [session.chat(format_hint=format_hint)]
        session.apply("you", "turn left")
        chats.append(session.chat(format_hint=format_hint))
        for reply in replies[1:]:
            take_reply(session, reply)
            chats.append(session.chat(format_hint=format_hint))
    finally:
        close_session(session)
    assert [len(c) for c in seen] == [2, 4, 6, 8]
    assert chats == seen
    assert seen[-1][4]["content"] == "no action here" and seen[-1][5]["content"].startswith("Format error")
    assert seen[0][1]["content"].endswith('then a line "Action: <one action>".') is format_hint


def value_of(page: str, element_id: str) -> str:
    return html.unescape(re.search(rf'id="{element_id}"[^>]*value="([^"]*)"', page).group(1))


@pytest.mark.parametrize(
    ("form", "status", "says"),
    [
        ({"env": "no-such-env", "task": "0"}, 400, "Unknown env"),
        ({"env": "babyai", "task": "seven"}, 400, "not a task id"),
        ({"env": "babyai", "task": "-3"}, 400, "not a task id"),
    ],
)
def test_play_rejects_bad_input_with_a_clear_page(client, form, status, says):
    token = _form_token(client.get("/play").text)
    r = client.post("/play", data={**form, "form_token": token})
    assert r.status_code == status
    assert says in _text(r.text)
    assert client.post("/play", data=form).status_code == 403  # no form token
    assert client.get("/play/not-a-session").status_code == 404


@pytest.mark.browser
@pytest.mark.slow
def test_frames_of_a_webarena_episode_recorded_in_another_process(tmp_path):
    """A WebArena episode played by another process (its own bundled sites, on other ports) replays
    here: the env names the bundled sites alike in every process, so the replay matches the
    recording turn by turn and each turn has its screenshot."""
    import subprocess
    import sys

    from agentgym_viewer import frames
    from PIL import Image

    from agentgym.plugins import env_specs

    if "webarena" not in env_specs():
        pytest.skip("agentgym-env-webarena is not installed")
    from agentgym_webarena.browser import find_chromium

    try:
        find_chromium()
    except Exception as exc:  # noqa: BLE001 - the finder says what to install
        pytest.skip(f"webarena needs Chromium: {exc}")
    path = tmp_path / "webarena.episodes.jsonl"
    script = (
        "from agentgym_train.rollout.evaluate import evaluate\n"
        "from agentgym_train.policies import make_policy\n"
        "from agentgym.trajectory import write_episodes\n"
        "_, episodes = evaluate(['webarena'], make_policy('scripted'), split='test', limit=2, max_turns=15)\n"
        f"write_episodes({str(path)!r}, episodes)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    episodes = list(read_episodes(path))
    assert len(episodes) == 2 and all(e.success for e in episodes)
    assert "URL: http://shopping.test/" in episodes[0].steps[0].observation
    try:
        for episode in episodes:
            got = frames.frames_for({"id": f"webarena-{episode.task_id}", "path": str(path)}, episode)
            assert not isinstance(got, str), got
            assert len(got) == len(episode.steps) + 1
            assert Image.open(io.BytesIO(got[-1])).size == (1280, 720)
    finally:
        frames.clear()
