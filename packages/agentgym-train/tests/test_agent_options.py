"""The agent options for models that do not follow an env's format on their own (default off):
``match_actions`` takes a free-text reply naming exactly one available action as that action;
``format_hint`` states the reply format in the system prompt and reminds of it under observations.
Played on the real BabyAI env."""

from __future__ import annotations

import json

import pytest
from agentgym_train.policies import make_policy
from agentgym_train.policies.base import BasePolicy, Generation
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs

from agentgym.plugins import get_env_spec
from agentgym.testing.conformance import run_expert
from agentgym.trajectory import read_episodes

SPLIT = get_env_spec("babyai").splits["test"].task_ids
TASK = SPLIT[0]  # "go to the red ball", with "go to red ball 1" among its actions
LONG_TASK = SPLIT[6]  # seven expert steps: doors to open ("toggle and go through ..."), a key to pick up


class Says(BasePolicy):
    """A chat model's zero-shot habit: a sensible sentence, never an ``Action:`` line."""

    name = "says"

    def __init__(self, text: str):
        self.text = text

    def generate(self, requests, sampling):
        return [Generation(self.text) for _ in requests]


class ExpertInProse(BasePolicy):
    """The env's expert action, said in a sentence instead of on an ``Action:`` line."""

    name = "expert-in-prose"

    async def agenerate(self, requests, sampling):
        return [Generation(f"I think the best move now is to {await r.expert()}.") for r in requests]


def run(policy, task_id=TASK, max_turns=10, **options):
    spec = get_env_spec("babyai")
    engine = RolloutEngine(policy, {"babyai": LocalEnvs(spec)}, max_turns=max_turns, **options)
    (episode,) = engine.run([Task("babyai", task_id)])
    return episode


def test_a_free_text_reply_is_a_format_error_with_the_option_off():
    ep = run(Says("You can go to the red ball 1."))
    assert ep.termination == "format_error" and ep.num_turns == 3
    assert all(s.action is None and s.info == {"format_error": True} for s in ep.steps)


def test_a_free_text_reply_naming_one_available_action_steps_the_env_with_it():
    ep = run(Says("You can go to the red ball 1."), match_actions=True)
    (step,) = ep.steps
    assert step.raw_output == "You can go to the red ball 1." and step.action == "go to red ball 1"
    assert step.info["matched_action"] is True and step.info["valid_action"] is True
    assert ep.termination == "success" and ep.success


def test_matched_actions_play_the_expert_episode():
    """Every expert action said in prose is matched, and the episode is the expert's own."""
    spec = get_env_spec("babyai")
    actions, records, success = run_expert(spec, spec.make(), LONG_TASK, 60)
    ep = run(ExpertInProse(), task_id=LONG_TASK, max_turns=60, match_actions=True)
    assert len(actions) > 3 and any(a.startswith("toggle and go through") for a in actions)
    assert [s.action for s in ep.steps] == actions and ep.success == success
    assert [s.reward for s in ep.steps] == [r[1] for r in records]
    assert all(s.info["matched_action"] and s.valid_action for s in ep.steps)


def test_a_reply_naming_two_actions_stays_a_format_error_with_the_option_on():
    ep = run(Says("I could turn left, or maybe move forward."), match_actions=True)
    assert ep.termination == "format_error" and ep.num_turns == 3
    assert all(s.action is None and "matched_action" not in s.info for s in ep.steps)
    assert '"turn left"' in ep.steps[0].observation and '"move forward"' in ep.steps[0].observation


def test_an_action_line_is_read_by_the_parser_not_matched():
    ep = run(make_policy("scripted"), match_actions=True)
    assert ep.success and not any("matched_action" in s.info for s in ep.steps)


@pytest.mark.parametrize("format_hint", [False, True])
def test_format_hint_states_the_format_in_the_system_prompt_and_reminds_under_observations(format_hint):
    spec = get_env_spec("babyai")
    ep = run(Says("Hmm."), format_hint=format_hint)
    system, *turns = ep.messages
    users = [m.content for m in turns if m.role == "user"]
    statement = "Reply with exactly two lines:\nThought: <one short sentence>\nAction: <one action>"
    reminder = 'Reply with "Thought: <one short sentence>", then a line "Action: <one action>".'
    assert system.content.startswith(spec.prompt)  # the env's own prompt is kept as it is
    assert (statement in system.content) is format_hint
    # the example reply is in the parser's format, its action the first the env lists
    assert (
        "Example reply:\nThought: I choose my next step.\nAction: turn left" in system.content
    ) is format_hint
    assert users[0].endswith(reminder) is format_hint  # the first observation
    # format-error turns carry the parser's own explanation; observations the reminder
    assert [u.startswith("Format error") for u in users] == [False, True, True]


@pytest.mark.parametrize(
    "env, example",
    [
        ("textcraft", "Thought: I choose my next step.\nAction: get 2 oak logs"),
        ("search", "<answer>American</answer>"),
        ("webarena", "I choose my next step.\n```\nclick [201]\n```"),
    ],
)
def test_format_hint_example_for_an_env_without_an_action_list_is_its_prompts_own(env, example):
    """No action list: the example reply's action is the one the env's prompt shows, in the format
    of the env's parser, and the example reads back as that action."""
    from agentgym.parsers import parse_action
    from agentgym.prompting import system_prompt

    spec = get_env_spec(env)
    prompt = system_prompt(spec, {}, format_hint=True)
    assert prompt.startswith(spec.prompt) and prompt.endswith(f"Example reply:\n{example}")
    assert parse_action(spec.action_parser, example).ok
    assert system_prompt(spec, {}) == spec.prompt


def test_format_hint_reminder_follows_every_observation():
    ep = run(make_policy("scripted"), task_id=LONG_TASK, format_hint=True)
    users = [m.content for m in ep.messages if m.role == "user"]
    assert len(users) == ep.num_turns  # the first observation, and one after each step but the last
    assert all(
        u.endswith('\n\nReply with "Thought: <one short sentence>", then a line "Action: <one action>".')
        for u in users
    )
    assert not any(
        "Reply with" in s.observation for s in ep.steps
    )  # the env's observations stay as they were


def test_train_config_keys_default_off():
    cfg = TrainConfig()
    assert (cfg.match_actions, cfg.format_hint) == (False, False)
    cfg = TrainConfig.load(None, ["match_actions=true", "format_hint=true"])
    assert (cfg.match_actions, cfg.format_hint) == (True, True)


def test_eval_cli_flags_reach_the_episodes_and_the_report(tmp_path):
    from agentgym.cli import main

    out = tmp_path / "r.json"
    args = ["eval", "--env", "babyai", "--policy", "scripted", "--limit", "2", "-o", str(out)]
    try:
        main([*args, "--match-actions", "--format-hint"])
    except SystemExit as exc:
        assert not exc.code
    report = json.loads(out.read_text())["envs"]["babyai"]
    assert report["matched_actions"] == 0 and report["success"] == 1.0  # the expert writes Action: lines
    episodes = list(read_episodes(tmp_path / "r.episodes.jsonl"))
    assert all("Example reply:" in e.messages[0].content for e in episodes)


# -- constrain_actions: constrained decoding (the hf policy, on the tiny model) ------------------


def test_constrained_decoding_only_ever_produces_one_of_the_choices(tiny_model):
    from agentgym_train.policies.base import Request, Sampling
    from agentgym_train.policies.hf import HFPolicy

    policy = HFPolicy(str(tiny_model), device="cpu", dtype="float32")
    choices = ["Action: turn left", "Action: go to red ball 1", "Action: guess 50"]
    allowed = {tuple(policy.chat.encode(c) + [policy.chat.eot_id]) for c in choices}
    messages = [{"role": "system", "content": "Play."}, {"role": "user", "content": "Go."}]
    requests = [Request(messages, choices=choices, seed=s) for s in range(12)]
    requests.append(Request(messages))  # a free row in the same batch
    gens = policy.generate(requests, Sampling(temperature=1.0, max_new_tokens=24))
    assert all(tuple(g.token_ids) in allowed and g.text in choices for g in gens[:-1])
    assert len({g.text for g in gens[:-1]}) > 1  # sampled, not one fixed reply
    assert tuple(gens[-1].token_ids) not in allowed  # the untrained model, unconstrained
    greedy = policy.generate(requests[:3], Sampling(temperature=0.0, max_new_tokens=24))
    assert len({g.text for g in greedy}) == 1 and greedy[0].text in choices


def test_constrain_actions_makes_every_turn_an_available_action(tiny_model):
    from agentgym_train.policies.hf import HFPolicy

    policy = HFPolicy(str(tiny_model), device="cpu", dtype="float32")
    for seed in range(3):
        ep = run(policy, max_turns=4, constrain_actions=True, episode_seed=seed)
        # every turn an action the env takes, until the turn cap (or the goal, reached by chance)
        assert ep.termination in ("max_turns", "success"), ep.termination
        assert ep.steps and all(s.info.get("valid_action") for s in ep.steps)
    plain = run(policy, max_turns=4)  # the same untrained model, free
    assert not all(s.info.get("valid_action") for s in plain.steps)


def test_constrain_actions_needs_a_policy_that_can():
    from agentgym.errors import AgentGymError

    with pytest.raises(AgentGymError, match="constrain_actions needs a policy"):
        run(Says("turn left"), constrain_actions=True)
