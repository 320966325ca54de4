"""The clients' transport layer: one httpx request/response model, sync and async, and what an answer means.

``RemoteEnv`` speaks through a plain ``httpx.Client`` (:func:`sync_client`). ``AsyncEnvPool``
speaks through :class:`AsyncHTTP`, plain HTTP/1.1 over :class:`KeepAliveTransport`'s connections:
httpx's request and response machinery cost four times the bytes' own round trip, per request,
which was most of the pool's cost on a batch (httpx's error types are kept).
:func:`send` and :meth:`AsyncHTTP.send` make one attempt and hand back its response (or a
:class:`Reply`, the fields of one the clients read) or its transport error, for the retry policy
(``client/retry.py``) to judge; :func:`raise_for` turns a final response into its JSON body or the
error it stands for.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import orjson

from agentgym.errors import AgentGymError
from agentgym.protocol import error_from

#: One attempt's outcome: the server's response, or why none came.
Outcome = httpx.Response | httpx.TransportError


class Reply:
    """A response as the clients read it (``httpx.Response``'s fields they use): the status, the
    headers (lower-case names), the body."""

    __slots__ = ("content", "headers", "status_code")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes):
        self.status_code, self.headers, self.content = status_code, headers, content

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return loads(self.content)


def check_token(token: str | None, where: str = "the token") -> str | None:
    """A bearer token as a header carries it: printable ASCII, no spaces (a CR or LF would start
    another header). Else an error that names ``where`` it came from, never the token."""
    if token and not all(33 <= ord(c) < 127 for c in token):
        raise AgentGymError(f"{where}: the token holds spaces, control or non-ASCII characters")
    return token


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {check_token(token)}"} if token else {}


def sync_client(url: str, *, token: str | None, timeout: float) -> httpx.Client:
    """The sync side: httpx's own client and pool (one session's requests go one at a time)."""
    return httpx.Client(base_url=url, timeout=timeout, headers=_headers(token))


def send(client: httpx.Client, method: str, url: str, **kw: Any) -> Outcome:
    """One attempt of a request: its response, or the transport error that stopped it."""
    try:
        return client.request(method, url, **kw)
    except httpx.TransportError as exc:
        return exc


def loads(content: bytes) -> Any:
    """A JSON body: orjson's parse (several times the standard library's speed on a batch of
    observations), or the standard library's where orjson refuses (``Infinity``, which the
    server writes for an infinite float)."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


def raise_for(response: httpx.Response | Reply) -> Any:
    """A final response's JSON body (the response itself if not JSON), or the error it carries, raised."""
    if response.status_code < 400:
        return (
            loads(response.content)
            if response.headers.get("content-type", "").startswith("application/json")
            else response
        )
    try:
        err = response.json()["error"]
        code, message = err["code"], err["message"]
    except (ValueError, KeyError, TypeError):
        raise AgentGymError(
            f"HTTP {response.status_code}: {response.text[:200]}", status=response.status_code
        ) from None
    raise error_from(code, message, response.status_code)


_READ_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, IndexError)


class KeepAliveTransport:
    """Plain HTTP/1.1 over asyncio streams, with a LIFO of idle keep-alive connections per server.

    httpcore's pool rescans every connection for every connection on each request it queues or
    finishes (quadratic in the connections: with 64 sessions stepping at once, most of the
    client's time), and without ``sniffio`` installed it retries a failed import on every request.
    The env servers answer small JSON bodies on loopback: this is all the pool needs. At most
    ``max_connections`` requests are in flight per server; the rest wait for a connection.
    """

    #: an idle connection older than this is not reused (uvicorn closes idle ones after 5 s)
    IDLE_S = 4.0

    def __init__(self, max_connections: int = 64):
        self.max_connections = max_connections
        self._idle: dict[tuple[str, int], list[tuple[float, asyncio.StreamReader, asyncio.StreamWriter]]] = {}
        self._slots: dict[tuple[str, int], asyncio.Semaphore] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    async def exchange(
        self, key: tuple[str, int], payload: bytes, method: str, timeouts: dict[str, Any], where: str
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send one request (``payload``: its bytes, head and body) on a keep-alive connection to
        ``key`` and read its response: ``(status, headers, body)``; httpx's transport errors."""
        self._on_running_loop()
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = asyncio.Semaphore(self.max_connections)
        async with slots:
            reader, writer = await self._connect(key, timeouts.get("connect"))
            try:
                async with asyncio.timeout(timeouts.get("read")):
                    writer.write(payload)
                    status, headers, content, keep = await self._read_response(reader, method)
            except TimeoutError as exc:
                writer.close()
                raise httpx.ReadTimeout(f"no response from {where} in time") from exc
            except _READ_ERRORS as exc:
                writer.close()
                raise httpx.ReadError(f"{type(exc).__name__}: {exc}") from exc
            except BaseException:  # cancelled mid-exchange: the connection's state is unknown
                writer.close()
                raise
            if keep:
                self._idle.setdefault(key, []).append((time.monotonic(), reader, writer))
            else:
                writer.close()
        return status, headers, content

    async def _connect(
        self, key: tuple[str, int], timeout: float | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        idle, now = self._idle.get(key, []), time.monotonic()
        while idle:
            t, reader, writer = idle.pop()
            if now - t < self.IDLE_S and not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.open_connection(*key)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {key[0]}:{key[1]} timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{key[0]}:{key[1]}: {exc}") from exc

    @staticmethod
    async def _read_response(
        reader: asyncio.StreamReader, method: str
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
        lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        version, status = lines[0].split(b" ", 2)[:2]
        headers = [tuple(part.strip() for part in line.split(b":", 1)) for line in lines[1:] if line]
        fields = {k.lower(): v for k, v in headers}
        keep = version == b"HTTP/1.1" and fields.get(b"connection", b"").lower() != b"close"
        code = int(status)
        if method == "HEAD" or code in (204, 304) or 100 <= code < 200:
            return code, headers, b"", keep
        if b"content-length" in fields:
            return code, headers, await reader.readexactly(int(fields[b"content-length"])), keep
        if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            chunks = []
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            return code, headers, b"".join(chunks), keep
        return code, headers, await reader.read(), False  # delimited by the connection's close

    def _on_running_loop(self) -> None:
        """A caller that runs each batch in its own event loop (``asyncio.run`` per rollout, as the
        native trainer does) cannot reuse the last loop's connections or semaphores: both belong
        to that loop, and its idle connections are dropped unclosed (closing needs their loop)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._idle.clear()
            self._slots.clear()
            self._loop = loop

    async def aclose(self) -> None:
        self._on_running_loop()
        for idle in self._idle.values():
            for _, _, writer in idle:
                writer.close()
        self._idle.clear()


class AsyncHTTP:
    """The async pool's HTTP: requests written as bytes on :class:`KeepAliveTransport`'s
    connections, answers read as :class:`Reply` (the bearer token and JSON content type on each)."""

    def __init__(self, *, token: str | None, timeout: float, max_connections: int):
        self.transport = KeepAliveTransport(max_connections)
        self.timeouts = {"connect": timeout, "read": timeout}
        self._extra = f"authorization: Bearer {check_token(token)}\r\n".encode() if token else b""
        self._servers: dict[str, tuple[tuple[str, int], bytes]] = {}  # base url -> (key, host line)

    def _server(self, url: str) -> tuple[tuple[str, int], bytes]:
        server = self._servers.get(url)
        if server is None:
            parsed = httpx.URL(url)
            if parsed.scheme != "http":
                raise httpx.UnsupportedProtocol(f"only http:// is served by this transport, not {url}")
            key = (parsed.host, parsed.port or 80)
            server = self._servers[url] = (key, f"host: {key[0]}:{key[1]}\r\n".encode())
        return server

    async def send(
        self, method: str, url: str, path: str, body: bytes | None = None
    ) -> Reply | httpx.TransportError:
        """One attempt of ``method url+path`` with a JSON ``body``: its reply, or the transport
        error that stopped it."""
        try:
            key, host = self._server(url)
        except httpx.TransportError as exc:
            return exc
        head = b"%s %s HTTP/1.1\r\n" % (method.encode(), path.encode()) + host + self._extra
        if body is not None:
            head += b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body)
        payload = head + b"\r\n" + (body or b"")
        try:
            status, raw, content = await self.transport.exchange(
                key, payload, method, self.timeouts, url + path
            )
        except httpx.TransportError as exc:
            return exc
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
        return Reply(status, headers, content)

    async def aclose(self) -> None:
        await self.transport.aclose()
