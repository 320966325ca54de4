"""TRL's own ``GRPOTrainer`` trains on our envs through ``agentgym.adapters.trl`` (trl 1.16, CPU).

The tiny model is random, so it never calls a tool on its own: a short SFT by TRL's own
``SFTTrainer`` first teaches it the expert's one tool call on BabyAI's red-ball tasks (solved by
``go to red ball 1``). Two GRPO steps then mix those tasks with others, so the returns TRL logs are
neither all 0 nor all the same, and each is checked against the env's own return for the actions.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from agentgym.testing import import_or_skip

pytestmark = pytest.mark.interop
import_or_skip("trl", reason="TRL is installed in the hatch environment 'interop' (hatch run interop:test)")

import agentgym  # noqa: E402
from agentgym.adapters.trl import (  # noqa: E402
    OVER,
    EnvFailure,
    environment_factory,
    task_dataset,
    tool_tokenizer,
)
from agentgym.server.background import serve_in_process  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

RED_BALL = [0, 1, 2, 8]  # BabyAI train tasks the expert solves with one "go to red ball 1"
OTHERS = [3, 4, 9, 10]
GROUP = 4  # num_generations


def expert_call(action: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "act", "arguments": {"action": action}}}


@pytest.fixture(scope="module")
def primed(tiny_model: Path, sft_teacher: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """The tiny model after TRL's SFTTrainer taught it the expert's tool call on the red-ball tasks."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import get_json_schema

    tokenizer = tool_tokenizer(str(tiny_model))
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    env = environment_factory("babyai")()
    tools = [get_json_schema(env.act)]
    rows = [
        {
            "prompt": [{"role": "user", "content": env.reset(task_id=t)}],
            "completion": [
                {"role": "assistant", "content": "", "tool_calls": [expert_call("go to red ball 1")]}
            ],
            "tools": tools,
        }
        for t in RED_BALL
    ] * 8
    sft_teacher(model, tokenizer, rows, tmp_path_factory.mktemp("sft"), steps=80)
    return model, tokenizer


def train_grpo(primed: tuple[Any, Any], factory: Any, dataset: Any, out: Path) -> Any:
    from agentgym_train.models.device import native_bf16
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = primed
    config = GRPOConfig(
        bf16=native_bf16("cpu"),  # TRL's default, True, is emulated where the CPU lacks it (conftest.teach)
        output_dir=str(out),
        max_steps=2,
        per_device_train_batch_size=2 * GROUP,
        num_generations=GROUP,
        max_completion_length=96,
        max_tool_calling_iterations=2,
        temperature=0.5,
        learning_rate=1e-6,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=dataset,
        environment_factory=factory,
    )
    trainer.train()
    return trainer


def check_logged_returns(trainer: Any, factory: Any) -> None:
    """Two steps, and the reward TRL logged at each is the mean return of that step's episodes."""
    assert trainer.state.global_step == 2
    key = f"rewards/{factory.env_class.__name__}/mean"
    means = [h[key] for h in trainer.state.log_history if key in h]
    assert len(means) == 2 and len(factory.episodes) == 2 * 2 * GROUP
    for step, logged in enumerate(means):
        episodes = factory.episodes[step * 2 * GROUP : (step + 1) * 2 * GROUP]
        assert logged == pytest.approx(math.fsum(e.episode_return for e in episodes) / len(episodes))


def replayed_return(name: str, task_id: int, actions: list[str]) -> float:
    env = agentgym.make(name)
    env.reset(options={"task_id": task_id})
    for action in actions:
        if env.episode_over:
            break
        env.step(action)
    return env.score


def test_grpo_trains_two_steps_on_babyai_and_logs_the_envs_returns(primed, tmp_path: Path) -> None:
    factory = environment_factory("babyai")
    dataset = task_dataset("babyai", tasks=RED_BALL + OTHERS)
    trainer = train_grpo(primed, factory, dataset, tmp_path)

    check_logged_returns(trainer, factory)
    # every logged return is the env's own for the actions the model took
    for e in factory.episodes:
        assert e.episode_return == replayed_return("babyai", e.task_id, e.actions)
    solved = [e for e in factory.episodes if e.episode_return > 0]
    assert solved and all(e.terminated and e.task_id in RED_BALL for e in solved)
    assert len(solved) < len(factory.episodes)  # the others' returns are 0: the group's rewards differ


def test_grpo_on_babyai_served_by_agentgym_serve_logs_the_servers_returns(primed, tmp_path: Path) -> None:
    """The env over HTTP (``agentgym serve babyai``, its own process), on the red-ball tasks the
    primed model solves: TRL logs each step's mean return, and it is not 0 (a reward lost on the
    way would show)."""
    with serve_in_process(["babyai"]) as served:
        factory = environment_factory("babyai", url=served.url)
        trainer = train_grpo(primed, factory, task_dataset("babyai", tasks=RED_BALL), tmp_path)
    check_logged_returns(trainer, factory)
    key = f"rewards/{factory.env_class.__name__}/mean"
    assert all(h[key] > 0 for h in trainer.state.log_history if key in h)
    for e in factory.episodes:
        assert e.episode_return == replayed_return("babyai", e.task_id, e.actions)


def test_a_third_party_plugin_trains_over_http_with_no_code_of_its_own(
    primed, scaffold_env, tmp_path
) -> None:
    with serve_in_process([scaffold_env]) as served:
        factory = environment_factory(scaffold_env, url=served.url)
        trainer = train_grpo(primed, factory, task_dataset(scaffold_env, limit=2), tmp_path)
    check_logged_returns(trainer, factory)
    for e in factory.episodes:
        assert e.episode_return == replayed_return(scaffold_env, e.task_id, e.actions)


def test_the_tool_steps_the_env_invalid_actions_are_observations_and_the_end_is_said(scaffold_env) -> None:
    env = environment_factory(scaffold_env)()
    prompt = env.reset(task_id=5)
    assert "act" in prompt and "Numbers:" in prompt
    assert "Invalid action" in env.act("dance")
    expert = agentgym.env_specs()[scaffold_env].make_expert(env._env)
    while True:
        reply = env.act(expert(env._env.last_observation, {}))
        if OVER in reply:
            break
    assert env.act("swap 1 2") == OVER  # nothing is stepped after the end
    assert env.get_reward() == pytest.approx(env._env.score) and env.get_reward() > 0


def test_an_env_failure_is_never_a_zero_reward() -> None:
    with serve_in_process(["babyai"]) as served:
        env = environment_factory("babyai", url=served.url)()
        env.reset(task_id=0)
        served.proc.terminate()
        served.proc.wait(timeout=30)
        with pytest.raises(agentgym.AgentGymError):
            env.act("move forward")
    with pytest.raises(EnvFailure, match="failed during the rollout"):
        env.get_reward()


def test_a_chatml_tokenizer_gets_qwens_tool_template_and_others_are_refused(tiny_model) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    assert "<tool_call>" not in tokenizer.chat_template
    assert "<tool_call>" in tool_tokenizer(tokenizer).chat_template  # ChatML: Qwen2.5's, with tool calls
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        ["go to the red ball"] * 5, trainers.BpeTrainer(vocab_size=50, special_tokens=["</s>"])
    )
    other = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>")
    other.chat_template = "{% for m in messages %}{{ m['content'] }}</s>{% endfor %}"
    with pytest.raises(ValueError, match="Unrecognized chat template"):
        tool_tokenizer(other)
