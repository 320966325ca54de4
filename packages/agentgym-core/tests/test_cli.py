"""The agentgym command line, run as a user runs it (a subprocess)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from agentgym.server.background import serve_in_process


def agentgym(*args, input=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "agentgym", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_envs_and_plugins_list_the_example_with_its_distribution():
    envs = agentgym("envs")
    assert envs.returncode == 0 and "guess" in envs.stdout and "agentgym-env-guess" in envs.stdout
    data = json.loads(agentgym("envs", "--json").stdout)
    guess = next(e for e in data if e["name"] == "guess")
    assert guess["distribution"] == "agentgym-env-guess"
    assert guess["splits"]["test"] == {
        "size": 100,
        "categories": {"medium": 34, "large": 33, "small": 33},
        "description": "ids 1000-1099",
    }
    plugins = json.loads(agentgym("plugins", "--json").stdout)
    assert {"name": "guess", "distribution": "agentgym-env-guess"}.items() <= next(
        p for p in plugins if p["name"] == "guess"
    ).items()
    assert "agentgym-env-guess" in agentgym("plugins").stdout


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["serve", "nope"], "unknown env 'nope'"),
        (["serve", "guess", "--port", "99999"], "99999"),
        (["serve", "guess", "--workers", "0"], "--workers"),
        (["serve", "guess", "--host", "0.0.0.0"], "--token"),
        (["play", "guess", "--task", "-1"], "--task"),
        (["play", "guess", "--split", "validation"], "no split 'validation'"),
        (["play", "nope"], "unknown env"),
        (["frobnicate"], "No such command"),
    ],
)
def test_bad_arguments_give_one_line_and_nonzero_exit(args, reason):
    r = agentgym(*args)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("agentgym: error:") and reason in lines[0]
    assert "Traceback" not in r.stderr


def test_help_answers_questions():
    r = agentgym("serve", "--help")
    assert r.returncode == 0 and "--workers" in r.stdout and "--token" in r.stdout and "/v1/step" in r.stdout


def test_play_in_the_terminal():
    # A person types: a help request, an invalid action, an expert hint, then bisects by hand.
    lines = [":help", "dance", ":expert"] + [f"guess {n}" for n in range(1, 11)]
    r = agentgym("play", "guess", "--task", "1002", input="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Guess the hidden integer between 1 and 10" in out  # the instruction
    assert "Invalid action" in out and "(invalid action)" in out
    assert "expert suggests: guess 5" in out
    assert "success" in out and "return 1.000" in out


def test_play_labels_an_episode_the_player_stopped():
    r = agentgym("play", "guess", "--task", "1002", input="guess 1\n")  # input runs out after one turn
    assert r.returncode == 0, r.stderr
    assert (
        "end of input" in r.stdout and "stopped after 1 turn(s)" in r.stdout and "max_turns" not in r.stdout
    )
    r = agentgym("play", "guess", "--task", "1002", "--max-turns", "1", input="guess 1\n")
    assert "max_turns after 1 turn(s)" in r.stdout  # the turn cap, not the player


def test_play_watches_the_expert():
    r = agentgym("play", "guess", "--task", "1002", "--expert")
    assert r.returncode == 0 and "expert>" in r.stdout and "success after" in r.stdout


def test_serve_serves_until_interrupted():
    with serve_in_process(["guess"]) as served:
        # Play remotely through the same CLI.
        r = agentgym("play", "guess", "--task", "1001", "--expert", "--url", served.url)
        assert r.returncode == 0 and "success after" in r.stdout
        served.proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert served.proc.wait(timeout=30) == 0


def test_demo_plays_over_http():
    r = agentgym("demo", "--episodes", "2")
    assert r.returncode == 0, r.stderr
    assert "solved 2/2" in r.stdout
