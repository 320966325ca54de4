"""The hf policy's KV caches: what an episode keeps between turns (its tokens and their keys and
values), where a call's rows sit in its cache, and a cache that writes into buffers allocated once."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


@dataclass
class Kept:
    """An episode's context after a turn: its token ids and, per layer, their keys and values
    (``heads x tokens x head_dim``, the batch row taken out)."""

    tokens: list[int]
    kv: list[tuple[Any, Any]]


@dataclass
class Layout:
    """Where a call's rows sit in its KV cache: ``C`` slots of cached context, then ``S`` of new
    prompt tokens, then the decoded ones; a row's slots are ``[its cached context | pad | its new
    prompt tokens | pad | decoded]``."""

    reuse: list[tuple[int, Kept | None]]  # per row: how many cached tokens, and from which turn
    cached: Any  # B: the row's cached tokens
    lens: Any  # B: the row's whole prompt
    new: Any  # B: the row's new prompt tokens, run in this call's prefill
    C: int
    S: int


@functools.cache
def buffered_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class BufferedLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys and values are views of preallocated buffers."""

        def __init__(self, capacity: int):
            super().__init__()
            self.capacity, self.length = capacity, 0

        def lazy_initialization(self, key_states: Any, value_states: Any, *_: Any) -> None:
            batch, heads, _, dim = key_states.shape
            self.device = key_states.device
            self.k_buf = key_states.new_empty((batch, heads, self.capacity, dim))
            self.v_buf = value_states.new_empty((batch, heads, self.capacity, value_states.shape[-1]))
            self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            end = self.length + key_states.shape[-2]
            if end > self.capacity:
                raise RuntimeError(f"KV buffer of {self.capacity} slots cannot take {end}")
            self.k_buf[:, :, self.length : end] = key_states
            self.v_buf[:, :, self.length : end] = value_states
            self.length = end
            self.keys, self.values = self.k_buf[:, :, :end], self.v_buf[:, :, :end]
            return self.keys, self.values

        def get_seq_length(self, *_: Any) -> int:
            return self.length

    return BufferedLayer


def new_cache(config: Any, capacity: int) -> Any:
    """A KV cache that writes each step into buffers of ``capacity`` slots allocated once.
    ``DynamicCache`` concatenates instead, copying the whole cache at every decoded token.
    Models with sliding-window layers keep it."""
    from transformers import DynamicCache

    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        return DynamicCache()
    from transformers.cache_utils import Cache

    return Cache(layers=[buffered_layer_class()(capacity) for _ in range(config.num_hidden_layers)])
