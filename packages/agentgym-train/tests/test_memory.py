"""Process-memory settings training runs under (``agentgym_train.models.memory``)."""

from __future__ import annotations

import os


def test_the_kernel_cache_is_bounded_unless_the_user_set_it(monkeypatch):
    """oneDNN keeps a compiled kernel per matrix shape, 1,024 by default: the trainer bounds it
    through oneDNN's own variable, and a value the user set stands."""
    from agentgym_train.models.memory import KERNEL_CACHE, bound_kernel_cache

    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    assert bound_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(KERNEL_CACHE)
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "256")
    assert not bound_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "256"
