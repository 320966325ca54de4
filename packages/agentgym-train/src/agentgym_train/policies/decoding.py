"""How the hf policy picks each token: greedy, or temperature then top-p from the shared random
stream, or from each row's own stream (a request's seed) so that a row's reply depends on its
logits and its seed alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_train.policies.base import Sampling


def row_uniforms(seeds: Sequence[int | None], sampling: Sampling, device: Any) -> Any:
    """Each row's ``max_new_tokens`` draws for this reply, from its request's own stream; None
    (the shared stream) unless every request has a seed, or when greedy."""
    import torch

    if sampling.greedy or any(seed is None for seed in seeds):
        return None
    return torch.stack(
        [
            torch.rand(
                sampling.max_new_tokens,
                generator=torch.Generator().manual_seed(int(seed)),  # type: ignore[arg-type]
                dtype=torch.float64,
            )
            for seed in seeds
        ]
    ).to(device)


def sample_tokens(logits: Any, sampling: Sampling, uniform: Any = None) -> Any:
    """One token per row: argmax when greedy, else temperature then top-p (nucleus) sampling,
    from the shared stream, or by inverse CDF at ``uniform`` (one draw per row from the row's
    own stream), so a row's token depends on nothing but its logits and its stream."""
    import torch

    if sampling.greedy:
        return logits.argmax(-1)
    probs = torch.softmax(logits / sampling.temperature, -1)
    if sampling.top_p < 1.0:
        sorted_p, order = probs.sort(-1, descending=True)
        # drop a token when the more likely ones already cover top_p (the first always stays)
        drop = sorted_p.cumsum(-1) - sorted_p >= sampling.top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    if uniform is None:
        return torch.multinomial(probs, 1)[:, 0]
    cdf = probs.double().cumsum(-1)
    total = cdf[:, -1]
    point = torch.minimum(uniform * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, point[:, None], right=True)[:, 0]  # point < total: in range
