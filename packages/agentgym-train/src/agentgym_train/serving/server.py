"""``agentgym serve-model``: a local Hugging Face causal LM behind a small OpenAI-compatible
chat-completions server, so any OpenAI client (our ``openai`` policy, verifiers, SDKs) can use it.

Routes: ``GET /v1/models``, ``POST /v1/chat/completions``, ``GET /health``. A request's
conversation is rendered with the model's chat template (:class:`~agentgym_train.models.chat.ChatFormat`)
and sampled by the ``hf`` policy (:class:`~agentgym_train.policies.hf.HFPolicy`): the same
messages give the same reply as that policy (greedy, or with the same ``seed``). Taken:
``messages`` (text content), ``temperature`` (0 = greedy), ``top_p``, ``max_tokens`` /
``max_completion_tokens``, ``n``, ``stop``, ``seed``, ``logprobs`` (each sampled token's, end of
turn included), ``return_token_ids`` (vLLM's: the sampled ids). Not served: streaming, tools,
images, ``top_logprobs`` (a 400 says so); other OpenAI fields are accepted and ignored. Requests
are answered one at a time (a lock around the model), each with its ``n`` choices in one batch.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentgym.server.background import command_in_process, free_port
from agentgym_train.models.chat import ChatTemplateError
from agentgym_train.models.loading import model_dir
from agentgym_train.policies.base import Request, Sampling
from agentgym_train.policies.hf import HFPolicy

#: Most choices one request may ask for (``n``).
MAX_N = 16


class BadRequest(Exception):
    """A request the server refuses: answered as an OpenAI-style JSON error."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message, self.status, self.param, self.code = message, status, param, code


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """The fields served; any other OpenAI field is accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int = Field(1, ge=1, le=MAX_N)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    logprobs: bool = False
    top_logprobs: int | None = None
    return_token_ids: bool = False
    tools: list[Any] | None = None


def _text(message: ChatMessage, index: int) -> dict[str, str]:
    """A message as the chat template takes it: a role and text content."""
    if message.role not in ("system", "user", "assistant", "developer"):
        raise BadRequest(
            f"messages[{index}]: role {message.role!r} is not served (system, user, assistant)",
            param=f"messages[{index}].role",
        )
    content = message.content
    if isinstance(content, list):
        if any(part.get("type") != "text" for part in content):
            raise BadRequest(
                f"messages[{index}]: only text content parts are served", param=f"messages[{index}].content"
            )
        content = "".join(str(part.get("text", "")) for part in content)
    role = "system" if message.role == "developer" else message.role
    return {"role": role, "content": content or ""}


def _refuse_unserved(req: ChatCompletionRequest) -> None:
    if req.stream:
        raise BadRequest(
            "stream=true is not supported: this server answers whole (non-streaming) completions only",
            param="stream",
            code="unsupported_parameter",
        )
    if req.tools:
        raise BadRequest("tools are not supported", param="tools", code="unsupported_parameter")
    if req.top_logprobs:
        raise BadRequest("top_logprobs is not supported", param="top_logprobs", code="unsupported_parameter")


def _stops(stop: str | list[str] | None) -> list[str]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > 4 or any(not s for s in stops):
        raise BadRequest("stop: at most 4 non-empty strings", param="stop")
    return stops


def _choice_seed(seed: int | None, index: int) -> int | None:
    """Choice ``index``'s own random stream (``seed`` for the first)."""
    return None if seed is None else (seed + index) % 2**63


class ModelServer:
    """One model, loaded once, answering chat completions (see the module docstring)."""

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        device: str = "cpu",
        dtype: str | None = None,
        chat_template: str | None = None,
        max_tokens: int = 512,
    ):
        self.name = name or model_dir(model).name
        # no KV cache kept between requests: a request may come from any conversation
        self.policy = HFPolicy(model, device=device, dtype=dtype, chat_template=chat_template, kv_reuse=False)
        self.context = getattr(self.policy.model.config, "max_position_embeddings", None)
        self.max_tokens = max_tokens
        self.created = int(time.time())
        self._lock = threading.Lock()

    def models(self) -> dict[str, Any]:
        card = {"id": self.name, "object": "model", "created": self.created, "owned_by": "agentgym"}
        return {"object": "list", "data": [card]}

    def _budget(self, req: ChatCompletionRequest, prompt_len: int) -> int:
        """The reply's token limit: the request's, else the server's default, within the context."""
        asked = req.max_completion_tokens or req.max_tokens
        room = None if self.context is None else self.context - prompt_len
        if room is not None and room < 1:
            raise BadRequest(f"the prompt's {prompt_len} tokens fill the model's context of {self.context}")
        if asked is not None and room is not None and asked > room:
            raise BadRequest(
                f"max_tokens {asked} + the prompt's {prompt_len} tokens exceed the model's context of "
                f"{self.context}",
                param="max_tokens",
            )
        return asked or (self.max_tokens if room is None else min(self.max_tokens, room))

    def complete(self, req: ChatCompletionRequest) -> dict[str, Any]:
        """The ``chat.completion`` object for ``req``; :class:`BadRequest` for what is not served."""

        _refuse_unserved(req)
        if req.model not in (None, self.name):
            raise BadRequest(
                f"model {req.model!r} is not served here (this server serves {self.name!r})",
                status=404,
                param="model",
                code="model_not_found",
            )
        stops = _stops(req.stop)
        messages = [_text(m, i) for i, m in enumerate(req.messages)]
        try:
            prompt = self.policy.chat.start(messages)
        except (ChatTemplateError, ValueError) as exc:
            raise BadRequest(
                f"the chat template cannot render these messages: {exc}", param="messages"
            ) from exc
        sampling = Sampling(req.temperature, req.top_p, self._budget(req, len(prompt)), req.seed)
        requests = [
            Request(messages=messages, prompt_ids=list(prompt), seed=_choice_seed(req.seed, i))
            for i in range(req.n)
        ]
        with self._lock:
            gens = self.policy.generate(requests, sampling)
        choices = [self._choice(i, g, stops, req) for i, g in enumerate(gens)]
        completion = sum(len(g.token_ids or []) for g in gens)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion,
                "total_tokens": len(prompt) + completion,
            },
        }

    def _choice(
        self, index: int, gen: Any, stops: Sequence[str], req: ChatCompletionRequest
    ) -> dict[str, Any]:
        text, ids, lps = gen.text, list(gen.token_ids or []), list(gen.logprobs or [])
        finish = "stop" if gen.stopped else "length"
        cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
        if cut >= 0:  # a stop string: the text ends before it, the tokens where it is reached
            text, finish = text[:cut], "stop"
            keep = self._tokens_covering(ids, cut)
            ids, lps = ids[:keep], lps[:keep]
        choice: dict[str, Any] = {
            "index": index,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish,
            "logprobs": {"content": self._logprobs(ids, lps)} if req.logprobs else None,
        }
        if req.return_token_ids:
            choice["token_ids"] = ids
        return choice

    def _tokens_covering(self, ids: Sequence[int], chars: int) -> int:
        """The fewest of ``ids`` whose text holds its first ``chars`` characters."""
        decode = self.policy.tokenizer.decode
        return next((k for k in range(len(ids) + 1) if len(decode(ids[:k])) >= chars), len(ids))

    def _logprobs(self, ids: Sequence[int], lps: Sequence[float]) -> list[dict[str, Any]]:
        decode = self.policy.tokenizer.decode
        out = []
        for token_id, lp in zip(ids, lps, strict=False):
            token = decode([token_id])
            out.append(
                {"token": token, "logprob": float(lp), "bytes": list(token.encode()), "top_logprobs": []}
            )
        return out


def _error(status: int, message: str, *, param: str | None = None, code: str | None = None) -> Any:
    from fastapi.responses import JSONResponse

    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


def create_app(server: ModelServer) -> Any:
    """The FastAPI app serving ``server``; every error is an OpenAI-style JSON body."""
    from fastapi import FastAPI
    from fastapi import Request as HTTPRequest  # not the policies' Request, imported above
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    app = FastAPI(title="agentgym serve-model")

    @app.exception_handler(BadRequest)
    async def bad_request(_: HTTPRequest, exc: BadRequest) -> Any:
        return _error(exc.status, exc.message, param=exc.param, code=exc.code)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: HTTPRequest, exc: RequestValidationError) -> Any:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" or tuple(e.get("loc", ())) == ("body",) for e in errors):
            return _error(400, "the request body must be a JSON object (Content-Type: application/json)")
        where = [".".join(str(p) for p in e.get("loc", ()) if p != "body") for e in errors]
        message = "; ".join(f"{w}: {e.get('msg')}" for w, e in zip(where, errors, strict=True))
        return _error(400, message or "invalid request", param=where[0] if where else None)

    @app.exception_handler(HTTPException)
    async def http_error(_: HTTPRequest, exc: HTTPException) -> Any:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def failed(_: HTTPRequest, exc: Exception) -> Any:
        return _error(500, f"generation failed: {type(exc).__name__}: {exc}")

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "model": server.name}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return server.models()

    @app.post("/v1/chat/completions")
    def chat_completions(req: ChatCompletionRequest) -> dict[str, Any]:
        return server.complete(req)  # a sync route: runs in the thread pool, the lock orders them

    return app


@contextlib.contextmanager
def serve_model_in_process(model: str, *args: str, timeout: float = 120.0) -> Iterator[str]:
    """Run ``agentgym serve-model MODEL --port P ARGS...`` as a user would, until ``/health``
    answers; yields the API's base URL. Stopped (SIGTERM, then SIGKILL) on exit."""
    port = free_port()
    command = ["serve-model", str(model), "--port", str(port), *args]
    with command_in_process(command, port=port, timeout=timeout) as served:
        yield f"{served.url}/v1"
