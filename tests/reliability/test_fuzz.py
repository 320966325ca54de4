"""Fuzzed input against real env servers (uvicorn on loopback) serving every env CI can run: the
light ones (``guess``, ``babyai``, ``textcraft``) and the heavy ones (``search``, ``sciworld``'s
JVMs, ``webarena``'s browser) on a server of their own. Requests drawn from the server's own OpenAPI
schema, hostile actions, concurrent and racing calls, streamed bodies over the size cap, and memory
after hundreds of such requests.

What must hold whatever arrives: no 5xx but a declared env failure (``env_crashed``,
``compat_failed``) or a declared capacity limit (503 ``at_capacity``); every 4xx has the JSON body
``{"error": {"code", "message"}}``; the server still answers ``/health`` afterwards. And an
over-long action gets the same answer over HTTP as in-process.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runnable import why_not

import agentgym
from agentgym.plugins import get_env_spec
from agentgym.server.background import serve_in_process, serve_in_thread
from agentgym.server.guard import MAX_BODY_BYTES
from agentgym.spaces import MAX_ACTION_CHARS

ENVS = ["guess", "babyai", "textcraft"]  # the light envs, all on the ``served`` server
HEAVY = ["search", "sciworld", "webarena"]  # on the ``heavy_served`` server, where they can run
#: Every env, each test on the server that serves it; a heavy one skipped where it cannot run.
EVERY_ENV = [*ENVS, *HEAVY]
#: 5xx answers the server declares: a crashed env or dialect, a full server. Anything else is a bug.
DECLARED_5XX = {(500, "env_crashed"), (500, "compat_failed"), (503, "at_capacity")}
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=400,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _test_task(env: str) -> int:
    return get_env_spec(env).splits["test"].task_ids[0]


def check_reply(r: httpx.Response) -> None:
    """The invariants every reply keeps, whatever the request was."""
    status = r.status_code
    if status >= 400:
        assert r.headers["content-type"].startswith("application/json"), (status, r.text[:300])
        body = r.json()
        assert set(body) == {"error"}, body
        assert isinstance(body["error"]["code"], str) and body["error"]["code"], body
        assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
        if status >= 500:
            assert (status, body["error"]["code"]) in DECLARED_5XX, (status, body)
    elif r.headers.get("content-type", "").startswith("application/json"):
        r.json()  # a 2xx JSON reply is valid JSON


def assert_healthy(url: str) -> None:
    r = httpx.get(f"{url}/health", timeout=30)
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with serve_in_thread(ENVS) as url:
        yield url


@pytest.fixture(scope="module")
def client(served: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served, timeout=60) as c:
        yield c


def runnable_heavy() -> list[str]:
    return [env for env in HEAVY if why_not(env) is None]


@pytest.fixture(scope="module")
def heavy_served() -> Iterator[str]:
    """The heavy envs that can run here, at most 4 instances each (the tests close what they open)."""
    envs = runnable_heavy()
    if not envs:
        pytest.skip(f"none of {HEAVY} can run here")
    with serve_in_thread(envs, max_instances=4) as url:
        yield url


@pytest.fixture
def at(request):
    """``at(env)``: ``(url, client)`` of the server that serves ``env`` (skips a heavy env that
    cannot run here)."""

    def get(env: str) -> tuple[str, httpx.Client]:
        if env in ENVS:
            return request.getfixturevalue("served"), request.getfixturevalue("client")
        if reason := why_not(env):
            pytest.skip(reason)
        url = request.getfixturevalue("heavy_served")
        c = httpx.Client(base_url=url, timeout=120)
        request.addfinalizer(c.close)
        return url, c

    return get


@pytest.fixture(scope="module")
def local() -> Iterator[Any]:
    """``local(env)``: one in-process env per env (a JVM, a browser: made once), closed at the end."""
    made: dict[str, Any] = {}

    def get(env: str) -> Any:
        if env not in made:
            made[env] = agentgym.make(env)
        return made[env]

    yield get
    for env in made.values():
        env.close()


def _local_step(local: Any, env: str, action: str) -> tuple:
    """The in-process answer to ``action`` as a first step of the env's first test task."""
    e = local(env)
    e.reset(options={"task_id": _test_task(env)})
    return e.step(action)


def _new_session(c: httpx.Client, env: str, task_id: int | None = None) -> int:
    r = c.post("/v1/sessions", json={"env": env, "task_id": _test_task(env) if task_id is None else task_id})
    assert r.status_code == 200, r.text
    return r.json()["session_id"]


# -- requests from the OpenAPI schema -----------------------------------------------------------

HUGE_INTS = [2**31, 2**63, 2**64 + 1, -(2**63) - 1, 10**30, -1]
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 2000),
    st.sampled_from(HUGE_INTS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
actions = st.one_of(
    st.sampled_from(["guess 50", "go forward", "inventory", "look", "", " ", "\x00", "🙂" * 3, "guess 🙂"]),
    st.text(max_size=40),
    st.builds(
        lambda n, ch: ch * n,
        st.sampled_from([MAX_ACTION_CHARS, MAX_ACTION_CHARS + 1]),
        st.sampled_from("x🙂"),
    ),
)
#: Raw bodies that are not JSON text: invalid UTF-8, a number over Python's 4,300-digit limit, junk.
raw_bodies = st.one_of(
    st.binary(max_size=40),
    st.sampled_from(
        [b"\xff\xfe\xfd", b'{"action": "\xc3\x28"}', b"{", b"[]", b"null", b'"x"', b"1" * 5000, b"{" * 5000]
    ),
)


def _resolve(schema: dict, spec: dict) -> dict:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    if "anyOf" in schema:  # Optional[X]: X
        schema = next((s for s in schema["anyOf"] if s.get("type") != "null"), schema["anyOf"][0])
        return _resolve(schema, spec)
    return schema


def _plausible(
    name: str, schema: dict, spec: dict, sids: list[int], envs: list[str], depth: int = 0
) -> st.SearchStrategy:
    """A value that mostly fits ``schema`` (so requests get past validation and reach the manager),
    sometimes of the wrong type or out of range."""
    schema = _resolve(schema, spec)
    kind = schema.get("type")
    if name in ("session_id", "id", "env_idx"):
        good = st.sampled_from(sids) | st.integers(-3, 10**6)
    elif name == "action":
        good = actions
    elif name == "env":
        good = st.sampled_from([*envs, "nope", "../guess", ""])
    elif kind == "integer":
        good = st.integers(-3, 2000) | st.sampled_from(HUGE_INTS)
    elif kind == "array" and depth < 3:
        good = st.lists(_plausible("", schema.get("items", {}), spec, sids, envs, depth + 1), max_size=4)
    elif kind == "object" and depth < 3:
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fields = {k: _plausible(k, v, spec, sids, envs, depth + 1) for k, v in props.items()}
        good = st.fixed_dictionaries(fields) | st.fixed_dictionaries(
            {k: v for k, v in fields.items() if k in required},
            optional={k: v for k, v in fields.items() if k not in required},
        )
    else:
        good = json_leaf
    # mostly values that fit, now and then one of the wrong type
    return st.one_of(good, good, good, good, good, json_leaf)


def _operations(spec: dict) -> list[tuple[str, str, dict]]:
    ops = []
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            ops.append((method.upper(), path, op))
    return ops


def _path_value(name: str, sids: list[int], envs: list[str]) -> st.SearchStrategy[str]:
    hostile = st.one_of(
        st.sampled_from(["nope", "0", "-1", str(2**64), "1e3", "1.5", " 1", "..", "%2e%2e", "..%2f..%2fetc"]),
        st.text(min_size=1, max_size=12),
    )
    fitting = st.sampled_from(envs) if name == "env" else st.sampled_from(sids).map(str)
    return st.one_of(fitting, fitting, fitting, hostile)


def _request(spec: dict, sids: list[int], envs: list[str]) -> st.SearchStrategy[tuple[str, str, dict]]:
    @st.composite
    def draw_request(draw: st.DrawFn) -> tuple[str, str, dict]:
        method, path, op = draw(st.sampled_from(_operations(spec)))
        params: dict[str, Any] = {}
        for p in op.get("parameters", []):
            if p["in"] == "path":
                value = draw(_path_value(p["name"], sids, envs))
                path = path.replace("{" + p["name"] + "}", quote(value, safe=""))
            elif p["in"] == "query" and draw(st.booleans()):
                params[p["name"]] = draw(_path_value(p["name"], sids, envs))
        kwargs: dict[str, Any] = {"params": params}
        body = op.get("requestBody")
        if body is not None or method == "POST":
            schema = (body or {}).get("content", {}).get("application/json", {}).get("schema", {})
            kind = draw(st.sampled_from(["plausible"] * 4 + ["any", "raw", "none"]))
            if kind == "plausible":
                kwargs["json"] = draw(_plausible("", schema, spec, sids, envs))
            elif kind == "any":
                kwargs["json"] = draw(json_value)
            elif kind == "raw":
                kwargs["content"] = draw(raw_bodies)
                kwargs["headers"] = {"content-type": "application/json"}
        return method, path, kwargs

    return draw_request()


def fuzz_server(url: str, envs: list[str], examples: int) -> None:
    """``examples`` requests drawn from the server's schema, over sessions of ``envs``."""
    with httpx.Client(base_url=url, timeout=120) as client:
        spec = client.get("/openapi.json").json()
        paths = set(spec["paths"])
        # every v1 and compatible route is in the schema, so every one is fuzzed
        assert {"/v1/sessions", "/v1/sessions/{sid}/step", "/v1/step", "/v1/reset", "/metrics"} <= paths
        assert {"/create", "/reset", "/step", "/observation", "/close", "/{env}/step"} <= paths
        sids = [_new_session(client, env) for env in envs for _ in range(2)]
        seen: set[tuple[str, str]] = set()

        @settings(FUZZ, max_examples=examples)
        @given(_request(spec, sids, envs))
        def run(request: tuple[str, str, dict]) -> None:
            method, path, kwargs = request
            seen.add((method, path.split("/")[1] if path.count("/") > 1 else path))
            r = client.request(method, path, **kwargs)
            check_reply(r)

        run()
        assert len(seen) > 10
        assert_healthy(url)


@pytest.mark.slow
def test_schema_fuzzed_requests_never_5xx_and_errors_are_json(served):
    fuzz_server(served, ENVS, 400)


@pytest.mark.slow
def test_schema_fuzzed_requests_to_the_heavy_envs(tmp_path):
    """The same on a server of SciWorld, Search and WebArena (each dialect's compatible routes
    included), with 2 instances each: most creations beyond get the declared 503."""
    envs = runnable_heavy()
    if not envs:
        pytest.skip(f"none of {HEAVY} can run here")
    with serve_in_thread(envs, max_instances=2) as url:
        fuzz_server(url, envs, 400)


# -- hostile actions ----------------------------------------------------------------------------


def _compat_create(c: httpx.Client, env: str, prefix: str) -> int:
    """``/create`` in the env's dialect: most answer ``{"id", ...}``, SearchQA's the bare id."""
    r = c.post(f"{prefix}/create", json={"env": env} if not prefix else None)
    assert r.status_code == 200, r.text[:300]
    body = r.json()
    return body if isinstance(body, int) else body["id"]


def _step_everywhere(c: httpx.Client, env: str, action: str) -> list[httpx.Response]:
    """The action through the v1 step, the batched step and the compatible step (plain and under the
    env's prefix), each on a fresh session at the env's first test task, closed after it."""
    task = _test_task(env)
    sid = _new_session(c, env)
    out = [c.post(f"/v1/sessions/{sid}/step", json={"action": action})]
    assert c.delete(f"/v1/sessions/{sid}").status_code == 200
    sid = _new_session(c, env)
    batch = c.post("/v1/step", json={"steps": [{"session_id": sid, "action": action}]})
    assert batch.status_code == 200, batch.text
    assert c.delete(f"/v1/sessions/{sid}").status_code == 200
    (item,) = batch.json()["results"]
    out.append(httpx.Response(422 if "error" in item else 200, json=item))
    for prefix in ("", f"/{env}"):
        sid = _compat_create(c, env, prefix)
        assert c.post(f"{prefix}/reset", json={"id": sid, "data_idx": task}).status_code == 200
        out.append(c.post(f"{prefix}/step", json={"id": sid, "action": action}))
        assert c.post(f"{prefix}/close", json={"id": sid}).status_code == 200
    return out


def _done(compat_reply: dict) -> bool:
    """A compatible step reply's end of episode: ``done``, or WebArena's terminated/truncated."""
    if "done" in compat_reply:
        return compat_reply["done"]
    return compat_reply["terminated"] or compat_reply["truncated"]


@pytest.mark.parametrize("env", EVERY_ENV)
@pytest.mark.parametrize(
    "length",
    [MAX_ACTION_CHARS + 1, 4 * MAX_ACTION_CHARS, 4 << 20],
    ids=["just-over", "4x", "4M-chars"],
)
def test_over_long_action_gets_the_in_process_answer_over_http(at, local, env, length):
    _, client = at(env)
    action = "guess " + "9" * (length - 6)
    obs, reward, terminated, truncated, info = _local_step(local, env, action)
    assert "too long" in obs and info["valid_action"] is False and not (terminated or truncated)
    v1, batch, compat, prefixed = _step_everywhere(client, env, action)
    for r in (v1, batch):
        assert r.status_code == 200, r.text[:300]
        got = r.json()
        assert got["observation"] == obs
        assert (got["reward"], got["terminated"], got["truncated"]) == (reward, terminated, truncated)
        assert got["info"]["valid_action"] is False and got["info"]["task_id"] == info["task_id"]
    for r in (compat, prefixed):
        assert r.status_code == 200, r.text[:300]
        assert r.json()["observation"] == obs and _done(r.json()) is False
    # the episode goes on: a next step of the same session is an ordinary step
    sid = _new_session(client, env)
    client.post(f"/v1/sessions/{sid}/step", json={"action": action})
    nxt = client.post(f"/v1/sessions/{sid}/step", json={"action": local_next_action(client, sid)})
    assert nxt.status_code == 200, nxt.text
    assert client.delete(f"/v1/sessions/{sid}").status_code == 200


def local_next_action(c: httpx.Client, sid: int) -> str:
    return c.get(f"/v1/sessions/{sid}/expert").json()["action"]


def test_absurd_body_is_413_not_an_observation(client):
    sid = _new_session(client, "guess")
    r = client.post(f"/v1/sessions/{sid}/step", json={"action": "x" * (MAX_BODY_BYTES + 1)})
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
    assert client.post(f"/v1/sessions/{sid}/step", json={"action": "guess 5"}).status_code == 200


@pytest.mark.parametrize("env", EVERY_ENV)
def test_binary_ish_surrogate_and_emoji_actions(at, local, env):
    served, client = at(env)
    # NUL and emoji are text: the env answers them (an invalid action, as in-process)
    for action in ("\x00", "go\x00forward", "🙂", "🙂" * (MAX_ACTION_CHARS + 1), "\u202egnp.exe"):
        expected = _local_step(local, env, action)[0]
        for r in _step_everywhere(client, env, action):
            assert r.status_code == 200, r.text[:300]
            assert r.json()["observation"] == expected
    # a lone surrogate is not text: 422 on the single-step routes, a per-item error in a batch
    sid = _new_session(client, env)
    lone = '{"action": "go \\ud800"}'
    headers = {"content-type": "application/json"}
    r = client.post(f"/v1/sessions/{sid}/step", content=lone, headers=headers)
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_action_text"
    compat_sid = _compat_create(client, env, f"/{env}")
    r = client.post("/step", content=f'{{"id": {compat_sid}, "action": "\\udfff"}}', headers=headers)
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_action_text"
    assert client.post("/close", json={"id": compat_sid}).status_code == 200
    # invalid UTF-8 sent as raw bytes: not JSON text at all
    for route in (f"/v1/sessions/{sid}/step", "/step", "/v1/step", "/create"):
        r = client.post(route, content=b'{"action": "\xff\xfe\x00"}', headers=headers)
        check_reply(r)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_json", (route, r.text)
    # the sessions carry on
    assert client.post(f"/v1/sessions/{sid}/step", json={"action": "look"}).status_code == 200
    assert client.delete(f"/v1/sessions/{sid}").status_code == 200
    assert_healthy(served)


def test_unknown_session_ids_are_404_everywhere(client):
    for sid in (987_654, 2**64, -1):
        for method, path, kwargs in [
            ("POST", f"/v1/sessions/{sid}/step", {"json": {"action": "look"}}),
            ("POST", f"/v1/sessions/{sid}/reset", {"json": {}}),
            ("GET", f"/v1/sessions/{sid}/observation", {}),
            ("GET", f"/v1/sessions/{sid}/render", {}),
            ("GET", f"/v1/sessions/{sid}/expert", {}),
            ("DELETE", f"/v1/sessions/{sid}", {}),
            ("POST", "/step", {"json": {"id": sid, "action": "look"}}),
            ("POST", "/babyai/reset", {"json": {"id": sid, "data_idx": 0}}),
            ("GET", "/observation", {"params": {"id": sid}}),
            ("POST", "/close", {"json": {"id": sid}}),
        ]:
            r = client.request(method, path, **kwargs)
            check_reply(r)
            assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_session", (path, r.text)
        results = client.post("/v1/step", json={"steps": [{"session_id": sid, "action": "x"}]}).json()
        assert results["results"][0]["error"]["code"] == "unknown_session"


# -- concurrency --------------------------------------------------------------------------------


def _in_threads(count: int, work: Any) -> list[Any]:
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return results


def test_concurrent_steps_on_one_session(client, served):
    sid = _new_session(client, "babyai")

    def steps(i: int) -> list[int]:
        with httpx.Client(base_url=served, timeout=60) as c:
            out = []
            for k in range(8):
                r = c.post(
                    f"/v1/sessions/{sid}/step",
                    json={"action": ["turn left", "go forward", "x" * 70000][k % 3]},
                )
                check_reply(r)
                out.append(r.status_code)
            return out

    statuses = [s for row in _in_threads(6, steps) for s in row]
    assert set(statuses) <= {200, 409}, statuses
    info = client.get(f"/v1/sessions/{sid}/observation")
    assert info.status_code == 200
    assert_healthy(served)


@pytest.mark.parametrize("env", EVERY_ENV)
def test_close_during_steps(at, env):
    served, client = at(env)
    sid = _new_session(client, env)
    stop, stepping = threading.Event(), threading.Event()

    def work(i: int) -> list[int]:
        with httpx.Client(base_url=served, timeout=60) as c:
            if i == 0:
                try:  # the close goes out once steps are answered, while the steppers go on
                    assert stepping.wait(60), "no step was answered in 60s"
                    r = c.delete(f"/v1/sessions/{sid}")
                    check_reply(r)
                finally:
                    stop.set()
                return [r.status_code]
            out = []
            while not stop.is_set() or len(out) < 3:
                r = c.post(f"/v1/sessions/{sid}/step", json={"action": "look"})
                check_reply(r)
                out.append(r.status_code)
                stepping.set()
                if len(out) > 200:
                    break
            return out

    closed, *steppers = _in_threads(4, work)
    assert closed == [200]
    assert {s for row in steppers for s in row} <= {200, 404, 409}
    r = client.post(f"/v1/sessions/{sid}/step", json={"action": "look"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_session"
    assert_healthy(served)


# -- streamed bodies ----------------------------------------------------------------------------


def raw_request(url: str, head: bytes, body: Iterable[bytes] = ()) -> tuple[int, dict[str, str], bytes]:
    """Send ``head`` and then ``body`` (from a thread, so a server that answers early is read while
    the rest is still being sent) over a plain socket; the reply's status, headers and body."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as s:
        s.sendall(head)

        def write() -> None:
            try:
                for chunk in body:
                    s.sendall(chunk)
            except OSError:
                pass  # the server answered and stopped reading: what it said is read below

        writer = threading.Thread(target=write)
        writer.start()
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head_text, _, rest = data.partition(b"\r\n\r\n")
        lines = head_text.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        size = int(headers.get("content-length", "0"))
        while len(rest) < size:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        writer.join(timeout=60)
        return int(lines[0].split()[1]), headers, rest[:size]


def _chunked(payload_size: int, chunk: int = 1 << 20) -> Iterator[bytes]:
    sent = 0
    while sent < payload_size:
        n = min(chunk, payload_size - sent)
        yield b"%x\r\n" % n + b"x" * n + b"\r\n"
        sent += n
    yield b"0\r\n\r\n"


def _head(path: str, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize("path", ["/v1/sessions/0/step", "/v1/step", "/create", "/step"])
def test_chunked_body_over_the_cap_is_cut_off_with_413(served, path):
    status, headers, body = raw_request(
        served, _head(path, "Transfer-Encoding: chunked"), _chunked(MAX_BODY_BYTES + (1 << 20))
    )
    assert status == 413, body[:300]
    assert headers["content-type"].startswith("application/json")
    assert json.loads(body)["error"]["code"] == "body_too_large"
    assert_healthy(served)


def test_content_length_over_the_cap_is_413_before_any_body(served):
    status, _, body = raw_request(served, _head("/v1/step", f"Content-Length: {MAX_BODY_BYTES + 1}"))
    assert status == 413 and json.loads(body)["error"]["code"] == "body_too_large"


def test_chunked_body_under_the_cap_is_served(client, served):
    sid = _new_session(client, "guess")
    payload = json.dumps({"action": "guess 50"}).encode()
    status, _, body = raw_request(
        served,
        _head(f"/v1/sessions/{sid}/step", "Transfer-Encoding: chunked"),
        [
            b"%x\r\n" % len(payload[:5]) + payload[:5] + b"\r\n",
            b"%x\r\n" % len(payload[5:]) + payload[5:] + b"\r\n",
            b"0\r\n\r\n",
        ],
    )
    assert status == 200, body
    assert "observation" in json.loads(body)


# -- memory -------------------------------------------------------------------------------------


def _rss(pid: int) -> int:
    import psutil

    return psutil.Process(pid).memory_info().rss


def _hostile_round(c: httpx.Client, i: int) -> None:
    env = ENVS[i % 3]
    sid = c.post("/v1/sessions", json={"env": env, "task_id": _test_task(env)}).json()["session_id"]
    for r in (
        c.post(f"/v1/sessions/{sid}/step", json={"action": "x" * (1 << 20)}),  # a megabyte, over-long
        c.post(f"/v1/sessions/{sid}/step", json={"action": "🙂\x00"}),
        c.post(
            f"/v1/sessions/{sid}/step", content=b"\xff" * 1000, headers={"content-type": "application/json"}
        ),
        c.post("/v1/step", json={"steps": [{"session_id": sid, "action": "y" * 70000}] * 4}),
        c.post("/v1/step", json={"steps": "many"}),
        c.get(f"/v1/sessions/{10**9 + i}/observation"),
        c.post("/reset", json={"id": 10**9 + i, "data_idx": 2**64}),
        c.get(f"/nope/{i}"),
        c.delete(f"/v1/sessions/{sid}"),
    ):
        check_reply(r)


@pytest.mark.slow
def test_memory_stays_bounded_under_hundreds_of_hostile_requests():
    """The server process and its env worker, after 50 rounds of the request mix as a warm-up and
    then 50 more (450 requests, 50 MiB of over-long actions): RSS grows by at most 24 MiB.

    The bound: the mix's largest buffers are the megabyte action (a few copies at once: the body,
    the parsed string, the pickle to the worker), so allocator slack after the warm-up stays within a
    few of those; a leak of the action itself, or of a session per round, would be 50 MiB or more."""
    import psutil

    with (
        serve_in_process(ENVS, "--workers", "1") as served,
        httpx.Client(base_url=served.url, timeout=60) as c,
    ):
        server = psutil.Process(served.proc.pid)

        def total() -> int:
            return sum(_rss(p.pid) for p in [server, *server.children(recursive=True)])

        for i in range(50):
            _hostile_round(c, i)
        before = total()
        for i in range(50, 100):
            _hostile_round(c, i)
        after = total()
        assert c.get("/health").json()["sessions"] == 0
    grown = (after - before) / (1 << 20)
    assert grown < 24, f"RSS grew {grown:.1f} MiB over 450 requests"
