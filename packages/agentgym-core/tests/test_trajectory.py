"""Episodes: JSONL round trip, schema versioning, finish(), and the AgentGym conversation format."""

from __future__ import annotations

import io
import json

import pytest
from pydantic import ValidationError

from agentgym.trajectory import (
    SCHEMA_VERSION,
    Episode,
    Message,
    Step,
    Tokens,
    export_agentgym,
    import_agentgym,
    read_episodes,
    write_episodes,
)


def sample_episode(task_id: int = 7, **fields) -> Episode:
    return Episode(
        env="guess",
        task_id=task_id,
        split="test",
        policy="scripted",
        seed=123,
        max_turns=10,
        messages=[
            Message(role="system", content="Guess the number between 1 and 10."),
            Message(role="user", content="Start guessing. ¿Listo? 🎲"),
            Message(role="assistant", content="Action: guess 5"),
            Message(role="user", content="Too low — höher!"),
            Message(role="assistant", content="Action: guess 8"),
        ],
        steps=[
            Step(raw_output="Action: guess 5", action="guess 5", observation="Too low — höher!", reward=0.0),
            Step(
                raw_output="Action: guess 8",
                action="guess 8",
                observation="正解 🎉",
                reward=1.0,
                terminated=True,
                info={"success": True, "valid_action": True},
                timings={"env": 0.002},
            ),
        ],
        tokens=Tokens(ids=[1, 2, 3], loss_mask=[0, 1, 1]),
        **fields,
    ).finish()


# ---------------------------------------------------------------------------------------------
# JSONL round trip
# ---------------------------------------------------------------------------------------------


def test_write_read_round_trip_with_unicode(tmp_path):
    episodes = [sample_episode(7), sample_episode(8, category="hard")]
    path = tmp_path / "episodes.jsonl"
    assert write_episodes(path, episodes) == 2
    back = list(read_episodes(path))
    assert back == episodes
    assert back[0].steps[1].observation == "正解 🎉"
    assert back[1].category == "hard"
    # Written as UTF-8 text, not \u escapes, one episode per line.
    text = path.read_text(encoding="utf-8")
    assert "正解 🎉" in text and "höher" in text
    assert len(text.splitlines()) == 2


def test_written_json_uses_return_alias_and_schema_version(tmp_path):
    path = tmp_path / "ep.jsonl"
    write_episodes(path, [sample_episode()])
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["return"] == 1.0
    assert "return_" not in data
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["env"] == "guess" and data["task_id"] == 7


def test_return_alias_is_read_back():
    ep = Episode.from_dict({"env": "guess", "task_id": 1, "return": 0.5})
    assert ep.return_ == 0.5
    assert ep.schema_version == SCHEMA_VERSION  # missing -> current version
    # The Python name is accepted too.
    assert Episode(env="guess", task_id=1, return_=0.25).to_dict()["return"] == 0.25


def test_extra_fields_survive_round_trip(tmp_path):
    ep = Episode(env="guess", task_id=1, steps=[Step(action="guess 1", judge_score=0.9)], run_id="abc")
    path = tmp_path / "ep.jsonl"
    write_episodes(path, [ep])
    (back,) = read_episodes(path)
    assert back.to_dict()["run_id"] == "abc"
    assert back.steps[0].model_dump()["judge_score"] == 0.9


ROLLOUT_FIELDS = ("sample", "reflections", "context_full", "tokens_from_text", "group")


def test_rollout_fields_default_when_absent_and_round_trip(tmp_path):
    # an episode file written before these fields were declared still loads, with their defaults
    old = {k: v for k, v in sample_episode().to_dict().items() if k not in ROLLOUT_FIELDS}
    ep = Episode.from_dict(old)
    assert {k: getattr(ep, k) for k in ROLLOUT_FIELDS} == {
        "sample": 0,
        "reflections": [],
        "context_full": False,
        "tokens_from_text": False,
        "group": None,
    }
    assert Episode(env="guess", task_id=1).reflections is not Episode(env="guess", task_id=2).reflections
    values = {
        "sample": 3,
        "reflections": ["guess higher"],
        "context_full": True,
        "tokens_from_text": True,
        "group": 5,
    }
    path = tmp_path / "ep.jsonl"
    write_episodes(path, [sample_episode(**values)])
    (back,) = read_episodes(path)
    assert {k: getattr(back, k) for k in ROLLOUT_FIELDS} == values
    assert back.to_agentgym() == sample_episode().to_agentgym()  # none of them is conversation


def test_write_append_and_creates_parent_dirs(tmp_path):
    path = tmp_path / "a" / "b" / "eps.jsonl"
    write_episodes(path, [sample_episode(1)])
    write_episodes(path, [sample_episode(2)], append=True)
    assert [ep.task_id for ep in read_episodes(path)] == [1, 2]
    # Without append the file is replaced.
    write_episodes(path, [sample_episode(3)])
    assert [ep.task_id for ep in read_episodes(path)] == [3]


def test_write_to_open_file_object():
    buf = io.StringIO()
    assert write_episodes(buf, (sample_episode(i) for i in range(3))) == 3
    lines = buf.getvalue().splitlines()
    assert [json.loads(line)["task_id"] for line in lines] == [0, 1, 2]


def test_read_skips_blank_lines(tmp_path):
    path = tmp_path / "eps.jsonl"
    path.write_text(
        "\n" + sample_episode(1).to_json() + "\n\n   \n" + sample_episode(2).to_json() + "\n",
        encoding="utf-8",
    )
    assert [ep.task_id for ep in read_episodes(path)] == [1, 2]


def test_newer_schema_version_rejected():
    with pytest.raises(ValidationError, match="newer") as exc:
        Episode.from_dict({"env": "guess", "task_id": 1, "schema_version": SCHEMA_VERSION + 1})
    assert str(SCHEMA_VERSION + 1) in str(exc.value)


def test_newer_schema_version_in_file_names_file_and_line(tmp_path):
    path = tmp_path / "future.jsonl"
    future = sample_episode().to_dict() | {"schema_version": SCHEMA_VERSION + 1}
    path.write_text(sample_episode().to_json() + "\n" + json.dumps(future) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as exc:
        list(read_episodes(path))
    assert f"{path}:2" in str(exc.value)
    assert "newer" in str(exc.value)


@pytest.mark.parametrize(
    "bad_line",
    [
        '{"env": "guess", "task_id": 1',  # truncated (a crashed writer)
        "not json at all",
        '{"task_id": 1}',  # no env
        '{"env": "guess", "task_id": "seven"}',
        "[1, 2, 3]",
    ],
)
def test_corrupt_line_names_file_and_line(tmp_path, bad_line):
    path = tmp_path / "eps.jsonl"
    path.write_text(sample_episode(1).to_json() + "\n\n" + bad_line + "\n", encoding="utf-8")
    reader = read_episodes(path)
    assert next(reader).task_id == 1  # good lines before the bad one are still read
    with pytest.raises(ValueError) as exc:
        next(reader)
    assert f"{path}:3:" in str(exc.value)


def test_invalid_termination_rejected():
    with pytest.raises(ValidationError):
        Episode(env="guess", task_id=1, termination="gave_up")


# ---------------------------------------------------------------------------------------------
# Step properties
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "info", "format_error", "valid"),
    [
        ("go", {}, False, True),
        ("go", {"valid_action": True}, False, True),
        ("go", {"valid_action": False}, False, False),
        (None, {}, True, False),
        (None, {"valid_action": True}, True, False),
    ],
)
def test_step_format_error_and_valid_action(action, info, format_error, valid):
    step = Step(action=action, info=info)
    assert step.format_error is format_error
    assert step.valid_action is valid


# ---------------------------------------------------------------------------------------------
# finish()
# ---------------------------------------------------------------------------------------------


def _episode(*steps: Step, success: bool = False) -> Episode:
    return Episode(env="guess", task_id=0, steps=list(steps), success=success)


def test_finish_success_from_last_step_info():
    ep = _episode(Step(reward=0.0), Step(reward=1.0, terminated=True, info={"success": True})).finish()
    assert ep.success is True
    assert ep.termination == "success"
    assert ep.return_ == 1.0
    assert ep.num_turns == 2


def test_finish_terminated_without_success_is_failure():
    ep = _episode(Step(reward=0.2), Step(reward=0.0, terminated=True, info={"success": False})).finish()
    assert ep.success is False
    assert ep.termination == "failure"


def test_finish_last_step_success_false_overrides_earlier_flag():
    ep = _episode(Step(terminated=True, info={"success": False}), success=True).finish()
    assert ep.success is False and ep.termination == "failure"


def test_finish_keeps_success_when_last_step_does_not_say():
    ep = _episode(Step(reward=1.0), success=True).finish()
    assert ep.success is True and ep.termination == "success"


def test_finish_env_truncated():
    ep = _episode(Step(), Step(truncated=True)).finish()
    assert ep.termination == "env_truncated"


def test_finish_terminated_wins_over_truncated():
    ep = _episode(Step(terminated=True, truncated=True)).finish()
    assert ep.termination == "failure"


def test_finish_neither_terminated_nor_truncated_is_max_turns():
    # The rollout stopped because it hit its own turn cap.
    ep = _episode(Step(), Step(), Step()).finish()
    assert ep.termination == "max_turns"
    assert ep.num_turns == 3


def test_finish_empty_episode():
    ep = _episode().finish()
    assert (ep.return_, ep.num_turns, ep.success, ep.termination) == (0.0, 0, False, "max_turns")


def test_finish_explicit_termination_wins():
    ep = _episode(Step(action=None, raw_output="???")).finish("format_error")
    assert ep.termination == "format_error"
    ep = _episode(Step(terminated=True, info={"success": True})).finish("error")
    assert ep.termination == "error"
    assert ep.success is True  # success is still read from the steps


def test_finish_return_is_exact_sum():
    # Ten steps of 0.1: a naive float sum gives 0.9999999999999999.
    ep = _episode(*[Step(reward=0.1) for _ in range(10)]).finish()
    assert sum([0.1] * 10) != 1.0
    assert ep.return_ == 1.0


def test_finish_returns_self_and_is_idempotent():
    ep = _episode(Step(reward=1.0, terminated=True, info={"success": True}))
    assert ep.finish() is ep
    first = ep.to_dict()
    assert ep.finish().to_dict() == first


# ---------------------------------------------------------------------------------------------
# AgentGym conversation format
# ---------------------------------------------------------------------------------------------


def test_to_agentgym_item_id_and_turns():
    item = sample_episode(7).to_agentgym()
    assert item["item_id"] == "guess_7"
    convs = item["conversations"]
    # AgentGym has no system role: the system prompt is a human turn answered by "OK".
    assert convs[0] == {"from": "human", "value": "Guess the number between 1 and 10.", "loss": False}
    assert convs[1] == {"from": "gpt", "value": "OK", "loss": False}
    assert [c["from"] for c in convs] == ["human", "gpt", "human", "gpt", "human", "gpt"]
    assert convs[2]["value"] == "Start guessing. ¿Listo? 🎲"
    assert convs[3]["value"] == "Action: guess 5"


def test_to_agentgym_loss_only_on_assistant_turns():
    convs = sample_episode().to_agentgym()["conversations"]
    losses = [(c["from"], c["loss"]) for c in convs]
    # Loss on every model-written turn, never on human turns nor on the synthetic "OK".
    assert losses == [
        ("human", False),
        ("gpt", False),
        ("human", False),
        ("gpt", True),
        ("human", False),
        ("gpt", True),
    ]


def test_agentgym_round_trip():
    ep = sample_episode(7)
    item = ep.to_agentgym()
    back = Episode.from_agentgym(item)
    assert (back.env, back.task_id, back.item_id) == ("guess", 7, "guess_7")
    # The system message came back as the human turn plus the "OK" reply; the rest is unchanged.
    assert [(m.role, m.content) for m in back.messages] == [
        ("user", "Guess the number between 1 and 10."),
        ("assistant", "OK"),
        *[(m.role, m.content) for m in ep.messages[1:]],
    ]
    # From there on the conversion is stable.
    assert back.to_agentgym() == item


def test_agentgym_round_trip_without_system_is_exact():
    msgs = [Message(role="user", content="obs"), Message(role="assistant", content="Action: go")]
    ep = Episode(env="babyai", task_id=3, messages=msgs)
    back = Episode.from_agentgym(ep.to_agentgym())
    assert back.messages == msgs
    assert back.num_turns == 1


def test_from_agentgym_env_with_underscores_and_fields():
    item = {
        "item_id": "sci_world_12",
        "conversations": [
            {"from": "system", "value": "You are an agent."},
            {"from": "human", "value": "obs", "loss": False},
            {"from": "gpt", "value": "look around", "loss": True},
        ],
    }
    ep = Episode.from_agentgym(item, split="train", success=True)
    assert (ep.env, ep.task_id) == ("sci_world", 12)
    assert [m.role for m in ep.messages] == ["system", "user", "assistant"]
    assert ep.split == "train" and ep.success is True
    assert ep.num_turns == 1


def test_from_agentgym_explicit_num_turns_wins():
    item = {
        "item_id": "guess_1",
        "conversations": [{"from": "gpt", "value": "a"}, {"from": "gpt", "value": "b"}],
    }
    assert Episode.from_agentgym(item).num_turns == 2
    assert Episode.from_agentgym(item, num_turns=5).num_turns == 5


def test_from_agentgym_keeps_loss_false_on_assistant_turns(tmp_path):
    # AgentGym data sets open with an instruction answered by "OK" (loss false): importing and
    # re-exporting must not turn that "OK" into a training target.
    item = {
        "item_id": "webshop_4",
        "conversations": [
            {"from": "human", "value": "You are a shopping agent.", "loss": None},
            {"from": "gpt", "value": "OK", "loss": False},
            {"from": "human", "value": "Find a mouse.", "loss": None},
            {"from": "gpt", "value": "Action: search[mouse]"},  # no flag: an assistant turn trains
            {"from": "human", "value": "Results...", "loss": None},
            {"from": "gpt", "value": "Action: click[item 1]", "loss": True},
        ],
    }
    ep = Episode.from_agentgym(item)
    assert [c["loss"] for c in ep.to_agentgym()["conversations"]] == [False, False, False, True, False, True]
    # The flag also survives our own JSONL format.
    path = tmp_path / "eps.jsonl"
    write_episodes(path, [ep])
    (back,) = read_episodes(path)
    assert back.to_agentgym() == ep.to_agentgym()


@pytest.mark.parametrize("item_id", ["guess", "guess_", "_7", "guess_seven", "", "guess_7a"])
def test_from_agentgym_bad_item_id_raises(item_id):
    with pytest.raises(ValueError, match="item_id") as exc:
        Episode.from_agentgym({"item_id": item_id, "conversations": []})
    assert repr(item_id) in str(exc.value)


def test_from_agentgym_missing_item_id_raises():
    with pytest.raises(ValueError, match="item_id"):
        Episode.from_agentgym({"conversations": []})


def test_from_agentgym_unknown_speaker_raises():
    item = {"item_id": "guess_1", "conversations": [{"from": "tool", "value": "x"}]}
    with pytest.raises(ValueError, match="'tool'"):
        Episode.from_agentgym(item)


AGENTGYM_ITEMS = [
    {
        "item_id": "guess_7",
        "conversations": [
            {"from": "human", "value": "Guess a number. Réponds en français.", "loss": False},
            {"from": "gpt", "value": "OK", "loss": False},
            {"from": "human", "value": "Go.", "loss": False},
            {"from": "gpt", "value": "Action: guess 5", "loss": True},
        ],
    },
    {
        "item_id": "babyai_3",
        "conversations": [
            {"from": "human", "value": "Goal: go to the red ball", "loss": False},
            {"from": "gpt", "value": "Action: go to red ball 1", "loss": True},
        ],
    },
]


def _check_imported(episodes: list[Episode]) -> None:
    assert [ep.item_id for ep in episodes] == ["guess_7", "babyai_3"]
    assert episodes[0].messages[0].content == "Guess a number. Réponds en français."
    assert [m.role for m in episodes[1].messages] == ["user", "assistant"]
    assert [ep.to_agentgym() for ep in episodes] == AGENTGYM_ITEMS


def test_import_agentgym_json_list(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(AGENTGYM_ITEMS, ensure_ascii=False, indent=2), encoding="utf-8")
    _check_imported(import_agentgym(path))


def test_import_agentgym_jsonl(tmp_path):
    path = tmp_path / "data.jsonl"
    lines = [json.dumps(item, ensure_ascii=False) for item in AGENTGYM_ITEMS]
    path.write_text("\n".join(lines[:1]) + "\n\n" + lines[1] + "\n", encoding="utf-8")
    _check_imported(import_agentgym(path))


def test_export_then_import_agentgym(tmp_path):
    path = tmp_path / "out.json"
    episodes = [sample_episode(1), sample_episode(2)]
    assert export_agentgym(episodes, path) == 2
    assert isinstance(json.loads(path.read_text(encoding="utf-8")), list)
    back = import_agentgym(path)
    assert [ep.item_id for ep in back] == ["guess_1", "guess_2"]
    assert [ep.to_agentgym() for ep in back] == [ep.to_agentgym() for ep in episodes]
