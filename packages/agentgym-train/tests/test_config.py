"""The ``rollout`` keys: their values, what they cannot go with, and what they need (no vLLM here);
where the env servers' token comes from."""

from __future__ import annotations

import sys

import pytest
from agentgym_train.rl.config import ConfigError, TrainConfig
from agentgym_train.rl.trainer import Trainer

from agentgym.errors import AgentGymError


def _cfg(tmp_path, **extra):
    return TrainConfig.from_dict({"name": "r", "runs_dir": str(tmp_path), "envs": ["guess"], **extra})


def test_rollout_names_its_choices_and_refuses_constrained_decoding_on_vllm(tmp_path):
    assert _cfg(tmp_path).rollout == "hf"
    with pytest.raises(ConfigError, match="rollout must be one of hf, vllm, got 'sglang'"):
        _cfg(tmp_path, rollout="sglang")
    with pytest.raises(
        ConfigError, match="constrain_actions needs rollout=hf: the vllm policy decodes freely"
    ):
        _cfg(tmp_path, rollout="vllm", constrain_actions=True)
    _cfg(tmp_path, rollout="hf", constrain_actions=True)


def test_verl_refuses_the_native_rollout_key(tmp_path):
    from agentgym_train.verl_backend.translate import verl_config

    with pytest.raises(ConfigError, match="rollout=vllm is native-backend only: verl chooses its rollout"):
        verl_config(_cfg(tmp_path, rollout="vllm"), tmp_path, "model", device="cpu")
    with pytest.raises(ConfigError, match="dynamic_sampling is native-backend only"):
        verl_config(_cfg(tmp_path, dynamic_sampling=True), tmp_path, "model", device="cpu")
    with pytest.raises(ConfigError, match="share_prompts is native-backend only"):
        verl_config(_cfg(tmp_path, share_prompts=True), tmp_path, "model", device="cpu")
    with pytest.raises(ConfigError, match="rollout_kv_cache_gb is native-backend only"):
        verl_config(_cfg(tmp_path, rollout_kv_cache_gb=0.5), tmp_path, "model", device="cpu")


def test_the_rollout_kv_cache_is_a_positive_size_or_null(tmp_path):
    assert _cfg(tmp_path).rollout_kv_cache_gb is None
    assert _cfg(tmp_path, rollout="vllm", rollout_kv_cache_gb=0.5).rollout_kv_cache_gb == 0.5
    with pytest.raises(ConfigError, match=r"rollout_kv_cache_gb must be > 0 \(or null\), got 0"):
        _cfg(tmp_path, rollout_kv_cache_gb=0)


def test_a_validation_limit_is_a_positive_count_or_null(tmp_path):
    """0 would read as "no limit" (the whole split), a negative count as no tasks at all."""
    assert _cfg(tmp_path, val_limit=3).val_limit == 3
    for bad in (0, -2):
        with pytest.raises(ConfigError, match=rf"val_limit must be >= 1 \(or null\), got {bad}"):
            _cfg(tmp_path, val_limit=bad)


def test_rollout_vllm_without_vllm_fails_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with pytest.raises(ConfigError, match=r"^rollout=vllm needs vLLM: .*agentgym-train\[vllm\]") as err:
        Trainer(_cfg(tmp_path, rollout="vllm")).setup()
    assert "\n" not in str(err.value)
    assert not (tmp_path / "r").exists()


def test_the_env_token_is_read_from_the_environment_or_a_file_and_is_never_a_key(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENTGYM_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=r"env_token: a secret is not a config key.*AGENTGYM_TOKEN"):
        TrainConfig.load(None, ["env_token=abc"])
    served = "env_urls=[http://127.0.0.1:36001]"
    assert TrainConfig.load(None, [served]).env_token() is None
    secret = tmp_path / "token"
    secret.write_text("from-the-file\nignored\n")
    cfg = TrainConfig.load(None, [f"env_token_file={secret}", served])
    assert cfg.env_token() == "from-the-file" and "from-the-file" not in str(cfg.to_dict())
    assert TrainConfig.load(None, [f"env_token_file={secret}"]).env_token() is None  # no servers: none read
    monkeypatch.setenv("AGENTGYM_TOKEN", "from-the-environment")
    assert cfg.env_token() == "from-the-environment"  # the variable wins (a verl node's own)
    monkeypatch.delenv("AGENTGYM_TOKEN")
    (tmp_path / "empty").touch()
    (tmp_path / "spaced").write_text("two words\n")
    for path, reason in (
        (tmp_path / "missing", "cannot read"),
        (tmp_path / "empty", "holds no token"),
        (tmp_path / "spaced", "holds spaces, control or non-ASCII"),
    ):
        with pytest.raises(AgentGymError, match=f"env_token_file.*{reason}") as caught:
            TrainConfig.load(None, [f"env_token_file={path}", served]).env_token()
        assert "two" not in str(caught.value)  # the token itself is never quoted
