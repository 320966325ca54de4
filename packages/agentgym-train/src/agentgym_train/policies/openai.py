"""``openai``: any OpenAI-compatible chat endpoint (vLLM's server, SGLang, hosted APIs) over httpx."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import httpx

from agentgym.errors import AgentGymError
from agentgym_train.policies.base import BasePolicy, Generation, Request, Sampling

_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class OpenAIPolicy(BasePolicy):
    """Chat completions with bounded concurrency and retries (backoff on 429/5xx and lost
    connections). ``base_url``, ``model`` and ``api_key`` default to ``OPENAI_BASE_URL``,
    ``AGENTGYM_OPENAI_MODEL`` (else the server's first model) and ``OPENAI_API_KEY``.

    ``token_ids=True`` asks a vLLM server for the sampled token ids too (``return_token_ids``),
    so its episodes are token-exact; other servers give text and per-token logprobs only.
    """

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 16,
        retries: int = 4,
        backoff: float = 0.5,
        timeout: float = 300.0,
        logprobs: bool = True,
        token_ids: bool = False,
        extra_body: dict[str, Any] | None = None,
        **_: Any,
    ):
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/")
        if not self.base_url:
            raise AgentGymError(
                "the openai policy needs --base-url (or OPENAI_BASE_URL), e.g. http://127.0.0.1:8000/v1"
            )
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.model = model or os.environ.get("AGENTGYM_OPENAI_MODEL")
        self.concurrency, self.retries, self.backoff, self.timeout = concurrency, retries, backoff, timeout
        self.logprobs, self.token_ids = logprobs, token_ids
        self.extra_body = dict(extra_body or {})

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            timeout=self.timeout,
            headers={"Authorization": f"Bearer {self.api_key}"},
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
        )

    async def _post(
        self, client: httpx.AsyncClient, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        last = ""
        for attempt in range(self.retries + 1):
            try:
                r = await (client.post(path, json=body) if body is not None else client.get(path))
            except httpx.TransportError as exc:
                last = f"{self.base_url}{path} unreachable: {exc}"
            else:
                if r.status_code < 400:
                    return r.json()
                last = f"HTTP {r.status_code} from {self.base_url}{path}: {r.text[:300]}"
                if r.status_code not in _RETRY_STATUS:
                    break
            if attempt < self.retries:
                await asyncio.sleep(self.backoff * 2**attempt)
        raise AgentGymError(last, code="policy_unavailable")

    async def _model(self, client: httpx.AsyncClient) -> str:
        if self.model is None:
            models = (await self._post(client, "/models")).get("data") or []
            if not models:
                raise AgentGymError(f"{self.base_url} serves no models; pass --model")
            self.model = models[0]["id"]
        return self.model

    def _body(self, request: Request, sampling: Sampling) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "max_tokens": sampling.max_new_tokens,
            "temperature": max(sampling.temperature, 0.0),
            "top_p": sampling.top_p,
            **self.extra_body,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if self.logprobs:
            body["logprobs"] = True
        if self.token_ids:
            body["return_token_ids"] = True
        return body

    def _parse(self, data: dict[str, Any]) -> Generation:
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        stopped = choice.get("finish_reason") != "length"
        content = (choice.get("logprobs") or {}).get("content") or None
        logprobs = [float(t["logprob"]) for t in content] if content else None
        ids = [int(t) for t in choice["token_ids"]] if self.token_ids and choice.get("token_ids") else None
        if ids is not None and logprobs is not None and len(logprobs) != len(ids):
            logprobs = None
        return Generation(text=text, token_ids=ids, logprobs=logprobs, stopped=stopped)

    async def agenerate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        async with self._client() as client:
            await self._model(client)
            gate = asyncio.Semaphore(self.concurrency)

            async def one(r: Request) -> Generation:
                async with gate:
                    try:
                        return self._parse(
                            await self._post(client, "/chat/completions", self._body(r, sampling))
                        )
                    except AgentGymError as exc:
                        return Generation("", error=exc.message)
                    except (KeyError, IndexError, TypeError, ValueError) as exc:
                        return Generation("", error=f"unexpected response from {self.base_url}: {exc!r}")

            return list(await asyncio.gather(*(one(r) for r in requests)))
