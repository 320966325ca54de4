"""The webarena env in headless Chromium against the bundled sites: WebArena's task format and
evaluators on original-format configs, actions, isolation, refusal, crashes, rendering."""

from __future__ import annotations

import difflib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from agentgym_webarena.browser import BrowserCrashedError, BrowserNotFoundError, find_chromium
from agentgym_webarena.env import WebArenaEnv
from agentgym_webarena.expert import find

import agentgym
from agentgym.errors import UnknownTaskError
from agentgym.server.background import serve_in_thread


def act(env: WebArenaEnv, obs: str, verb: str, role: str, name: str, *extra: str) -> str:
    """``verb`` the element of ``role`` and ``name`` in ``obs``, as an agent would (by its [id])."""
    element = find(obs, {"role": role, "name": name})
    assert element is not None, f"no {role} {name!r} in:\n{obs}"
    args = "".join(f" [{e}]" for e in extra)
    obs, reward, terminated, truncated, info = env.step(f"{verb} [{element}]{args}")
    assert info["valid_action"], obs
    return obs


# -- original WebArena configs, mapped to the bundled shop -------------------------------------------
def webarena_config(task_id: int, intent: str, evaluation: dict, **fields) -> dict:
    """A config as WebArena's config_files/<id>.json hold them (their extra fields included)."""
    return {
        "sites": ["shopping"],
        "task_id": task_id,
        "require_login": True,
        "storage_state": "./.auth/shopping_state.json",
        "start_url": "__SHOPPING__",
        "geolocation": None,
        "intent_template": intent,
        "instantiation_dict": {},
        "intent": intent,
        "require_reset": False,
        "eval": {
            "eval_types": [],
            "reference_answers": None,
            "reference_url": "",
            "program_html": [],
            "string_note": "",
            "reference_answer_raw_annotation": "",
            **evaluation,
        },
        "intent_template_id": 1000 + task_id,
        **fields,
    }


@pytest.fixture(scope="module")
def original_configs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("config_files")
    configs = [
        webarena_config(
            0,
            "What is the price of Lumina Wireless Earbuds S3?",
            {"eval_types": ["string_match"], "reference_answers": {"exact_match": "$61.49"}},
        ),
        webarena_config(
            1,
            "Show me the Books category sorted by price, lowest first.",
            {"eval_types": ["url_match"], "reference_url": "__SHOPPING__/category/books?sort=price_asc"},
        ),
        webarena_config(
            2,
            "Add 2 Lumina Wireless Earbuds S3 to my cart.",
            {
                "eval_types": ["program_html"],
                "program_html": [
                    {
                        "url": "__SHOPPING__/cart",
                        "locator": "document.querySelector('main').innerText",
                        "required_contents": {"must_include": ["Lumina Wireless Earbuds S3", "$122.98"]},
                    }
                ],
            },
        ),
    ]
    for config in configs:
        (folder / f"{config['task_id']}.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def env(original_configs):
    env = WebArenaEnv(tasks=str(original_configs))
    yield env
    env.close()


def search_and_open(env: WebArenaEnv, obs: str, product: str) -> str:
    obs = act(env, obs, "type", "searchbox", "Search", product)
    return act(env, obs, "click", "link", product)


def test_string_match_scores_a_right_and_a_wrong_answer(env):
    obs, info = env.reset(options={"task_id": 0})
    assert obs.startswith("OBSERVATION:\nTab 0 (current): One Stop Market")
    assert "\nURL: http://shopping.test/" in obs and "\nOBJECTIVE: What is the price" in obs
    assert obs.rstrip().endswith("PREVIOUS ACTION: None") and info["category"] == "shopping/string_match"
    obs = search_and_open(env, obs, "Lumina Wireless Earbuds S3")
    assert "$61.49" in obs
    _, reward, terminated, _, info = env.step("stop [$61.49]")
    assert terminated and reward == 1.0 and info["success"]
    env.reset(options={"task_id": 0})
    _, reward, terminated, _, info = env.step("stop [$61.50]")
    assert (
        terminated and reward == 0.0 and info["eval"] == [{"eval": "string_match.exact_match", "ok": False}]
    )


def test_url_match_scores_the_page_reached(env):
    obs, _ = env.reset(options={"task_id": 1})
    obs = act(env, obs, "click", "link", "Books")
    assert env.step("stop []")[1] == 0.0  # the category, but not sorted
    obs, _ = env.reset(options={"task_id": 1})
    obs = act(env, obs, "click", "link", "Books")
    obs = act(env, obs, "click", "link", "Price: low to high")
    assert "URL: " in obs and "sort=price_asc" in obs
    _, reward, _, _, info = env.step("stop []")
    assert reward == 1.0 and info["eval"][0]["eval"] == "url_match"


def test_program_html_checks_the_state_the_agent_changed(env):
    obs, _ = env.reset(options={"task_id": 2})
    assert "My Account" in obs  # require_login: signed in as the site's first customer
    obs = search_and_open(env, obs, "Lumina Wireless Earbuds S3")
    obs = act(env, obs, "type", "spinbutton", "Qty", "2", "0")
    obs = act(env, obs, "click", "button", "Add to cart")
    assert "You added 2" in obs
    _, reward, _, _, info = env.step("stop []")
    assert reward == 1.0, info
    # a locator that throws (no such element) finds nothing, as in WebArena: a failure, not a crash
    env.config["eval"]["program_html"][0]["locator"] = "document.querySelector('#no-such-thing').value"
    assert env._run(env._evaluate("")).score == 0.0
    # the same task after a reset: the cart is pristine again, and one earbud is not two
    obs, _ = env.reset(options={"task_id": 2})
    obs = search_and_open(env, obs, "Lumina Wireless Earbuds S3")
    act(env, obs, "click", "button", "Add to cart")
    assert env.step("stop []")[1] == 0.0


def test_the_same_episode_reads_the_same_in_another_process():
    """The bundled sites listen on a port of each process; the agent reads and writes them under
    fixed names, so the same task and actions read the same in any process (a server restoring a
    session elsewhere by replay, the viewer replaying an episode to re-create its frames)."""
    actions = ["goto [http://shopping.test/category/books]", "go_back", "stop [http://shopping.test/]"]
    script = (
        "import agentgym, json\n"
        "e = agentgym.make('webarena')\n"
        "out = [e.reset(options={'task_id': 0})[0]]\n"
        f"out += [e.step(a)[0] for a in {actions!r}]\n"
        "print(json.dumps(out))\n"
        "e.close()\n"
    )
    there = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, check=True
    ).stdout
    env = WebArenaEnv()  # the bundled tasks, as in the other process
    try:
        here = [env.reset(options={"task_id": 0})[0]] + [env.step(a)[0] for a in actions[:-1]]
        text, _, terminated, _, info = env.step(actions[-1])
    finally:
        env.close()
    there = json.loads(there.strip().splitlines()[-1])
    for k, (a, b) in enumerate(zip([*here, text], there, strict=True)):
        assert a == b, (k, "\n".join(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="")))
    assert "URL: http://shopping.test/category/books" in here[1]  # a goto by the shown name
    assert "127.0.0.1" not in "".join(here) and terminated
    assert info["answer"] == "http://shopping.test/"  # as the agent wrote it


# -- actions -------------------------------------------------------------------------------------------
def test_bad_actions_unknown_ids_and_refused_navigation_are_observations(env):
    obs, _ = env.reset(options={"task_id": 0})
    text, reward, terminated, _, info = env.step("fly [3]")
    assert not info["valid_action"] and "unknown action 'fly'" in text and not terminated
    text, _, _, _, info = env.step("click [987654321]")
    assert not info["valid_action"] and "There is no element [987654321]" in text
    text, _, _, _, info = env.step("goto [https://example.com/]")
    assert not info["valid_action"] and "outside this task's sites" in text
    assert "URL: http://shopping.test/" in text  # still on the shop
    from agentgym_webarena.sites.server import shared_sites

    forum = shared_sites().urls["reddit"]
    text, *_ = env.step(f"goto [{forum}/forums]")  # the forum is not this task's site
    assert "outside this task's sites" in text
    # a model's whole text: the first ``` block is the action
    text, _, _, _, info = env.step("I will search.\n```type [3] [earbuds] [1]```")
    assert info["valid_action"] or "There is no element" in text


def test_a_link_out_of_the_sites_is_refused_and_the_agent_stays(env):
    obs, _ = env.reset(options={"task_id": 0})
    link = "const a = document.createElement('a'); a.href = 'https://example.com/'; a.textContent = 'Away';"
    env._run(env.page.evaluate(f"() => {{ {link} document.body.prepend(a); }}"))
    obs, *_ = env.step("scroll [up]")  # an observation that shows the link
    obs = act(env, obs, "click", "link", "Away")
    assert "The request to https://example.com/ was refused" in obs
    assert "URL: http://shopping.test/" in obs and "Welcome to One Stop Market" in obs  # not the error page
    obs, *_ = env.step("scroll [down]")
    assert "NOTE:" not in obs  # told once


def test_tabs_keys_and_history(env):
    obs, _ = env.reset(options={"task_id": 0})
    obs = act(env, obs, "click", "link", "Books")
    obs, *_ = env.step("go_back")
    assert "Welcome to One Stop Market" in obs
    obs, *_ = env.step("go_forward")
    assert "URL: " in obs and "/category/books" in obs
    obs, *_ = env.step("new_tab")
    assert "Tab 1 (current)" in obs
    obs, _, _, _, info = env.step("tab_focus [5]")
    assert not info["valid_action"] and "no tab 5" in obs
    obs, *_ = env.step("tab_focus [0]")
    assert "Tab 0 (current)" in obs
    obs, *_ = env.step("close_tab")
    assert "Tab 1" not in obs and "Tab 0 (current)" in obs
    obs, *_ = env.step("scroll [down]")
    assert "PREVIOUS ACTION: scroll [down]" in obs
    obs, _, _, _, info = env.step("press [Ctrl+a]")
    assert info["valid_action"]


def test_render_is_a_screenshot(env):
    env.reset(options={"task_id": 0})
    env.render_mode = "rgb_array"
    try:
        frame = env.render()
    finally:
        env.render_mode = None
    assert frame.shape == (720, 1280, 3) and frame.std() > 0


# -- isolation -----------------------------------------------------------------------------------------
def test_sessions_have_their_own_data_and_reset_restores_it(original_configs):
    a, b = WebArenaEnv(tasks=str(original_configs)), WebArenaEnv(tasks=str(original_configs))
    try:
        obs_a, _ = a.reset(options={"task_id": 2})
        obs_b, _ = b.reset(options={"task_id": 2})
        obs_a = search_and_open(a, obs_a, "Lumina Wireless Earbuds S3")
        act(a, obs_a, "click", "button", "Add to cart")
        obs_b = act(b, obs_b, "click", "link", "My Cart (0 items)")
        assert "You have no items in your shopping cart" in obs_b  # a's cart is a's alone
        obs_a, _ = a.reset(options={"task_id": 2})
        assert "My Cart (0 items)" in obs_a  # the reset restored the pristine data
    finally:
        a.close()
        b.close()


def test_a_reset_leaves_nothing_of_the_last_episode():
    env = agentgym.make("webarena")
    try:
        shop = [i for i, t in enumerate(env.tasks) if t["sites"] == ["shopping"]]
        login = next(i for i in shop if env.tasks[i].get("require_login"))
        anonymous = next(i for i in shop if not env.tasks[i].get("require_login"))
        obs, _ = env.reset(options={"task_id": login})
        assert "My Account" in obs
        env.step("new_tab")
        obs, _ = env.reset(options={"task_id": anonymous})  # the same context, made as new
        assert "Sign in" in obs and "My Account" not in obs and "Tab 1" not in obs
        obs, *_ = env.step("go_back")
        assert "URL: about:blank" in obs  # no history into the last episode
    finally:
        env.close()


def test_an_unknown_task_id_is_refused_not_wrapped(env):
    env.reset(options={"task_id": 2})
    with pytest.raises(UnknownTaskError) as exc:  # the env's own tasks (3 configs), not the spec's 72
        env.reset(options={"task_id": 3})
    assert str(exc.value) == "unknown task id 3 for webarena: valid test 0..2"
    assert (exc.value.code, exc.value.status) == ("unknown_task", 422)
    assert env.task_id == 2 and "OBJECTIVE" in env.step("scroll [down]")[0]  # the episode goes on
    bundled = agentgym.make("webarena")
    try:
        with pytest.raises(UnknownTaskError) as exc:
            bundled.reset(options={"task_id": len(bundled.tasks)})
    finally:
        bundled.close()
    assert str(exc.value) == "unknown task id 72 for webarena: valid 0..71 (test 24 ids, train 48 ids)"


def test_its_original_clients_reset_of_an_unknown_task_is_a_json_error_and_keeps_the_session():
    """AgentGym-RL's WebArena client: /create answers {"env_idx"}, /reset names the task ``idx``;
    the refusal over v1 is the kit's."""
    with serve_in_thread(["webarena"]) as url, httpx.Client(base_url=url, timeout=120) as c:
        sid = c.post("/create").json()["env_idx"]
        r = c.post("/reset", json={"env_idx": sid, "seed": 0, "idx": 1000})
        assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_task", r.text
        assert "unknown task id 1000 for webarena" in r.json()["error"]["message"]
        assert c.post("/reset", json={"env_idx": sid, "seed": 0, "idx": 0}).status_code == 200
        assert c.get("/observation", params={"env_idx": sid}).status_code == 200


# -- the browser ---------------------------------------------------------------------------------------
def _chromium_pids() -> list[int]:
    """Browser main processes started by this test process (through Playwright's driver)."""
    me, out = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            pid, ppid = int(entry.name), int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if "--remote-debugging-pipe" not in cmdline or "--type=" in cmdline:
            continue
        while ppid > 1:  # one of ours if this process is an ancestor
            if ppid == me:
                out.append(pid)
                break
            try:
                ppid = int((Path("/proc") / str(ppid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                break
    return out


def _wait_until(predicate, what: str, timeout: float = 30.0) -> None:
    """Poll ``predicate`` until it is true; fail, saying what it waited for, after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
        time.sleep(0.02)


def test_a_crashed_browser_loses_its_sessions_and_is_restarted(original_configs):
    env = WebArenaEnv(tasks=str(original_configs))
    try:
        env.reset(options={"task_id": 0})
        launches = env.host.launches
        pids = _chromium_pids()
        assert pids, "no browser process found"
        browser = env.context.browser
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        _wait_until(lambda: not browser.is_connected(), "Playwright to see the killed browser disconnected")
        with pytest.raises(BrowserCrashedError, match="session is lost"):
            env.step("scroll [down]")
        obs, _ = env.reset(options={"task_id": 0})  # a new session gets a new browser
        assert "One Stop Market" in obs and env.host.launches == launches + 1
    finally:
        env.close()


def test_a_missing_browser_is_named(monkeypatch):
    monkeypatch.setenv("AGENTGYM_CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(BrowserNotFoundError, match="/nonexistent/chromium"):
        find_chromium()
    monkeypatch.delenv("AGENTGYM_CHROMIUM")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BrowserNotFoundError, match="apt-get install chromium"):
        find_chromium()


def test_listing_envs_imports_no_browser_library():
    code = "import sys, agentgym; agentgym.env_specs()['webarena']; print('playwright' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


# -- the bundled tasks ---------------------------------------------------------------------------------
def run_policy(env: WebArenaEnv, task_id: int, policy, max_turns: int = 20) -> bool:
    obs, info = env.reset(options={"task_id": task_id})
    for _ in range(max_turns):
        obs, reward, terminated, truncated, info = env.step(policy(obs, info))
        if terminated or truncated:
            return bool(info.get("success"))
    return False


@pytest.mark.slow
def test_a_stateless_expert_passes_the_state_tasks_and_trivial_policies_none():
    """The expert on every bundled task: test_golden_observations.py, which plays its episodes."""
    spec = agentgym.env_specs()["webarena"]
    env = spec.make()
    try:
        ids = [t for split in spec.splits.values() for t in split.task_ids]
        assert len(ids) >= 60

        # it keeps no state: a new expert at every turn (as a session restored by replay on another
        # server gets) solves the state-changing tasks too, without adding to a cart twice
        def fresh(observation: str, info: dict) -> str:
            return spec.make_expert(env)(observation, info)

        test = spec.splits["test"].categories
        state = [*test["shopping/state"], *test["reddit/state"]]
        assert all(run_policy(env, t, fresh) for t in state)
        assert not any(run_policy(env, t, lambda o, i: "stop []", 2) for t in ids)
        assert not any(run_policy(env, t, lambda o, i: "scroll [down]", 5) for t in ids[::6])
    finally:
        env.close()
