"""Talking to an OpenAI-compatible (vLLM) server: request building (pure) and a small client.

`build_request` turns one InputRow plus the pass settings into the keyword arguments of the openai package's
`create` call (vLLM-specific parameters under `extra_body`); it is a pure function, tested by dict equality.

`Client.send` posts it through the openai package but reads the raw body itself: a 512-token answer with
top-20 logprobs is about 1.4 MB of JSON, which pydantic models would take tens of milliseconds to build, while a
typed msgspec decode that skips what lbeval does not keep takes a few. Non-OpenAI endpoints (/metrics,
/version, /tokenize, /reset_prefix_cache) go through a plain httpx2 client. The API key is held only by the two
HTTP clients.

Timeouts: `timeout_s` (`lbeval run --timeout`) bounds the WHOLE request, from connect through sending to the
last byte of the body or stream, not each read: a server that trickles a byte just before every read timeout
still ends at the deadline. Both HTTP clients run over `_DeadlineTransport`, whose sockets bound every connect,
write and read by the time left to the deadline of the request in flight on that thread (`_DEADLINE`); the
stream parser also checks the deadline between lines. Connecting has its own, shorter bound (`connect_s`,
default 10 s). A request past its deadline fails with "timed out after N s (whole request)", retryable like
other transport failures. The transport honours HTTP_PROXY, HTTPS_PROXY and NO_PROXY itself
(`environment_proxy`), as httpx would without a custom transport.
"""

from __future__ import annotations

import ssl
import threading
import time
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpcore2
import httpx2
import msgspec
import openai

from eval.errors import ConfigError
from eval.prepare.inputs import InputRow
from eval.records.types import ClientTimings, TopK, Usage
from eval.redact import safe_url

TOKEN_ID_PREFIX = "token_id:"
ENDPOINTS = {"chat": "chat", "raw": "completions"}


@dataclass(frozen=True)
class RequestSettings:
    """What every request of a run shares (recorded in the manifest; changing it refuses a resume)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    top_logprobs: int = 20
    chat_template_kwargs: dict[str, Any] | None = field(default_factory=lambda: {"enable_thinking": False})
    max_tokens_override: int | None = None  # replaces every example's max_tokens (smoke runs)
    # fields the server kind needs for the sampling above (llama.cpp: repeat_penalty 1.0), sent with every
    # generation request (eval/run/server_kinds.py; set by the probe)
    server_fields: dict[str, Any] | None = None


@dataclass(frozen=True)
class WireDialect:
    """How a server kind puts on the wire what lbeval reads (eval/run/server_kinds.py builds one per kind).

    token_ids   "prefix": logprob tokens are "token_id:N" (vLLM's return_tokens_as_token_ids); "field": every
                logprob entry has an "id" (llama-server); "text": token text only, the generated ids from
                choices[].token_ids when the server sends them (SGLang's return_token_ids), the rest mapped
                from the text through the tokenize endpoint (`Client.text_token_id`)
    cached_absent_is_zero   a response without prompt_tokens_details means 0 cached tokens (SGLang with
                --enable-cache-report leaves the details out when the count is 0)
    tokenize_path, tokenize_key   the tokenize endpoint and the body key of its text (None: no endpoint)
    reset       the cache reset `Client.reset_prefix_cache` sends: "vllm", "unknown" (POST
                /reset_prefix_cache), "sglang" (POST /flush_cache), "llama-server" (POST
                /slots/{id}?action=erase for each slot), "" (none)
    """

    token_ids: str = "prefix"
    cached_absent_is_zero: bool = False
    tokenize_path: str | None = "/tokenize"
    tokenize_key: str = "prompt"
    reset: str = "vllm"


VLLM_WIRE = WireDialect()


def endpoint_for(row: InputRow) -> str:
    """ "chat" (/v1/chat/completions) for chat datasets, "completions" (/v1/completions) for raw ones."""
    try:
        return ENDPOINTS[row.mode]
    except KeyError:
        raise ValueError(f"{row.dataset}/{row.id}: unknown mode {row.mode!r}") from None


def build_request(
    row: InputRow,
    settings: RequestSettings,
    *,
    model: str,
    cache_salt: str | None,
    stream: bool,
    max_tokens: int | None = None,
    prompt: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create` or `client.completions.create`.

    `max_tokens` overrides the example's limit (timing passes and re-primes use 1); `prompt` replaces the
    example's prompt (the sibling-prefix control). Never sets `prompt_logprobs`: vLLM skips prefix-cache reads
    for such requests, which would make a warm pass cold.
    """
    endpoint = endpoint_for(row)
    text = row.prompt if prompt is None else prompt
    override = settings.max_tokens_override  # 0 is a limit (refused by the options), never "the example's"
    limit = max_tokens if max_tokens is not None else (row.max_tokens if override is None else override)
    req: dict[str, Any] = {"model": model}
    if endpoint == "chat":
        req["messages"] = [{"role": "user", "content": text}]
    else:
        req["prompt"] = text
    req.update(temperature=settings.temperature, top_p=settings.top_p, seed=settings.seed, max_tokens=limit)
    if endpoint == "chat":
        req.update(logprobs=True, top_logprobs=settings.top_logprobs)
    else:
        req["logprobs"] = settings.top_logprobs
    req["stream"] = stream
    if stream:
        req["stream_options"] = {"include_usage": True}
    extra: dict[str, Any] = {"return_tokens_as_token_ids": True}
    if endpoint == "chat" and settings.chat_template_kwargs is not None:
        extra["chat_template_kwargs"] = dict(settings.chat_template_kwargs)
    if cache_salt is not None:
        extra["cache_salt"] = cache_salt
    if row.stop_token_ids:
        extra["stop_token_ids"] = list(row.stop_token_ids)
        extra["min_tokens"] = 1
    extra.update(settings.server_fields or {})
    req["extra_body"] = extra
    return req


def endpoint_path(endpoint: str) -> str:
    """The path under the /v1 base URL of an endpoint_for() endpoint."""
    return "/chat/completions" if endpoint == "chat" else "/completions"


def wire_body(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON body the server receives (extra_body merged in)."""
    body = {k: v for k, v in request.items() if k != "extra_body"}
    body.update(request.get("extra_body") or {})
    return body


def request_settings(request: dict[str, Any]) -> dict[str, Any]:
    """What a record keeps of a request: the body minus the prompt text (never credentials)."""
    return {k: v for k, v in wire_body(request).items() if k not in ("messages", "prompt")}


# --- wire types (only what lbeval keeps; msgspec skips the rest, e.g. the per-token "bytes" arrays) ---------


class _Details(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _Details | None = None


class _Message(msgspec.Struct):
    content: str | None = None


class _ServerTimings(msgspec.Struct):
    """llama-server's `timings` object: cache_n is the prompt tokens reused from its cache."""

    cache_n: int | None = None


class _ErrorBody(msgspec.Struct):
    message: str | None = None
    code: int | str | None = None


def _decoders(nullable: bool) -> dict[str, msgspec.json.Decoder[Any]]:
    """Decoders for whole bodies and stream chunks of both endpoints.

    The fast set (nullable=False) types the alternatives' logprobs as plain floats, so no per-value None check
    is needed (vLLM clamps them to -9999.0); a body with a null there fails validation and is decoded again with
    the nullable set. gc=False: the per-token structs hold only str/float (no cycles), and 10,000 of them per
    answer would otherwise wake the garbage collector."""
    lp: Any = float | None if nullable else float
    alt = msgspec.defstruct("ChatAlt", [("token", str), ("logprob", lp), ("id", int | None, None)], gc=False)
    tok = msgspec.defstruct(
        "ChatTok",
        [
            ("token", str),
            ("logprob", float | None, None),
            ("top_logprobs", list[alt] | None, None),  # type: ignore[valid-type]
            ("id", int | None, None),  # llama-server
        ],
        gc=False,
    )
    chat_lp = msgspec.defstruct("ChatLogprobs", [("content", list[tok] | None, None)])  # type: ignore[valid-type]
    cmpl_lp = msgspec.defstruct(
        "CmplLogprobs",
        [
            ("tokens", list[str] | None, None),
            ("token_logprobs", list[float | None] | None, None),
            ("top_logprobs", list[dict[str, lp] | None] | None, None),
        ],
    )
    error = [
        ("usage", _Usage | None, None),
        ("timings", _ServerTimings | None, None),  # llama-server
        ("error", _ErrorBody | str | None, None),
        (
            "message",
            str | None,
            None,
        ),  # older vLLM error shape {"object": "error", "message": ..., "code": ...}
        ("code", int | str | None, None),
    ]
    chat_choice = msgspec.defstruct(
        "ChatChoice",
        [
            ("message", _Message | None, None),  # whole body
            ("delta", _Message | None, None),  # stream chunk
            ("logprobs", chat_lp | None, None),
            ("finish_reason", str | None, None),
            ("token_ids", list[int] | None, None),  # SGLang's return_token_ids
        ],
    )
    cmpl_choice = msgspec.defstruct(
        "CmplChoice",
        [
            ("text", str | None, None),
            ("logprobs", cmpl_lp | None, None),
            ("finish_reason", str | None, None),
            ("token_ids", list[int] | None, None),  # SGLang's return_token_ids
        ],
    )
    chat = msgspec.defstruct("ChatBody", [("choices", list[chat_choice] | None, None), *error])  # type: ignore[valid-type]
    cmpl = msgspec.defstruct("CmplBody", [("choices", list[cmpl_choice] | None, None), *error])  # type: ignore[valid-type]
    return {"chat": msgspec.json.Decoder(chat), "completions": msgspec.json.Decoder(cmpl)}


_FAST = _decoders(nullable=False)
_NULLABLE = _decoders(nullable=True)


def _decode(endpoint: str, raw: bytes | str) -> tuple[Any, bool]:
    """(decoded body, whether the nullable decoder was needed)."""
    try:
        return _FAST[endpoint].decode(raw), False
    except msgspec.ValidationError:
        return _NULLABLE[endpoint].decode(raw), True


# --- responses and failures --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    text: str
    token_ids: list[int]
    topk: TopK | None
    usage: Usage
    timings: ClientTimings
    finish_reason: str | None


class RequestFailed(Exception):
    """A request that did not produce a response. `retryable` failures are retried with backoff."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool, refused: bool = False):
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.refused = refused  # the connection was refused: the server was down (maybe restarting)


def _status_failure(status: int, message: str) -> RequestFailed:
    retryable = status >= 500 or status in (408, 409, 429)
    return RequestFailed(f"HTTP {status}: {message}", status=status, retryable=retryable)


def _error_message(body: bytes) -> str:
    try:
        obj = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body[:500].decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        for key in ("message", "detail", "error"):
            if obj.get(key):
                return str(obj[key])
    return str(obj)[:500]


# --- parsing -----------------------------------------------------------------------------------------------


class _Accumulator:
    """Collects text, token ids and top-k from a whole body or from stream chunks."""

    def __init__(self, endpoint: str, dialect: WireDialect = VLLM_WIRE) -> None:
        self.chat = endpoint == "chat"
        self.dialect = dialect
        self.text: list[str] = []
        self.ids: list[int] = []
        self.top_ids: list[list[int]] = []
        self.top_lps: list[list[float]] = []
        self.chosen: list[float] = []
        self.finish_reason: str | None = None
        self.usage: _Usage | None = None
        self.saw_logprobs = False
        self.cache_n: int | None = None  # llama-server's timings.cache_n
        self.choice_ids: list[int] = []  # SGLang's choices[].token_ids
        # dialects without "token_id:N": ids as far as the answer gives them (None: map the text)
        self.o_ids: list[int | None] = []
        self.o_texts: list[str] = []
        self.o_top_ids: list[list[int | None]] = []
        self.o_top_texts: list[list[str]] = []

    def add(self, body: Any, nullable: bool = False) -> bool:
        """Add one decoded body or chunk; True when it carried generated tokens or text."""
        if body.error is not None or (body.choices is None and body.message):
            err = body.error
            msg = err if isinstance(err, str) else (err.message if err is not None else body.message)
            code = err.code if isinstance(err, _ErrorBody) else body.code
            status = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) else 500
            raise _status_failure(status, str(msg))
        if body.usage is not None:
            self.usage = body.usage
        if body.timings is not None and body.timings.cache_n is not None:
            self.cache_n = body.timings.cache_n
        got = False
        for choice in body.choices or ():
            if self.chat:
                msg = choice.message or choice.delta
                piece = msg.content if msg is not None else None
            else:
                piece = choice.text
            if piece:
                self.text.append(piece)
                got = True
            if choice.logprobs is not None:
                got = self._add_logprobs(choice.logprobs, nullable) or got
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
            if choice.token_ids:
                self.choice_ids.extend(choice.token_ids)
        return got

    def _add_logprobs(self, lp: Any, nullable: bool) -> bool:
        self.saw_logprobs = True
        if self.dialect.token_ids != "prefix":
            return self._add_other(lp)
        try:
            return self._add_chat(lp, nullable) if self.chat else self._add_completions(lp, nullable)
        except ValueError:
            raise RequestFailed(
                "the server did not return tokens as 'token_id:N' (return_tokens_as_token_ids unsupported?)",
                retryable=False,
            ) from None

    def _add_chat(self, lp: Any, nullable: bool) -> bool:
        ids, chosen, top_ids, top_lps = (
            self.ids.append,
            self.chosen.append,
            self.top_ids.append,
            self.top_lps.append,
        )
        for tok in lp.content or ():
            if not tok.token.startswith(TOKEN_ID_PREFIX):
                raise ValueError(tok.token)
            ids(int(tok.token[9:]))
            chosen(_nan_if_none(tok.logprob))
            alts = tok.top_logprobs or ()
            top_ids([int(a.token[9:]) for a in alts])
            values = [a.logprob for a in alts]
            top_lps([_nan_if_none(v) for v in values] if nullable else values)
        return bool(lp.content)

    def _add_completions(self, lp: Any, nullable: bool) -> bool:
        tokens = lp.tokens or []
        chosen = lp.token_logprobs or [None] * len(tokens)
        tops = lp.top_logprobs or [None] * len(tokens)
        for tok, value, top in zip(tokens, chosen, tops, strict=True):
            if not tok.startswith(TOKEN_ID_PREFIX):
                raise ValueError(tok)
            self.ids.append(int(tok[9:]))
            self.chosen.append(_nan_if_none(value))
            top = top or {}
            self.top_ids.append([int(k[9:]) for k in top])
            values = list(top.values())
            self.top_lps.append([_nan_if_none(v) for v in values] if nullable else values)
        return bool(tokens)

    def _add_other(self, lp: Any) -> bool:
        """Logprobs of a dialect without "token_id:N" tokens: ids from an `id` field or a "token_id:N" token
        when there is one, else None (mapped from the text in `response`)."""
        if self.chat:
            entries = [(t.token, t.id, t.logprob, t.top_logprobs or ()) for t in lp.content or ()]
            rows = [
                (tok, tid, value, [(a.token, a.id, a.logprob) for a in alts])
                for tok, tid, value, alts in entries
            ]
        else:
            tokens = lp.tokens or []
            chosen = lp.token_logprobs or [None] * len(tokens)
            tops = lp.top_logprobs or [None] * len(tokens)
            rows = [
                (tok, None, value, [(k, None, v) for k, v in (top or {}).items()])
                for tok, value, top in zip(tokens, chosen, tops, strict=True)
            ]
        for tok, tid, value, alts in rows:
            self.o_ids.append(_given_id(tok, tid))
            self.o_texts.append(tok)
            self.chosen.append(_nan_if_none(value))
            self.o_top_ids.append([_given_id(t, i) for t, i, _ in alts])
            self.o_top_texts.append([t for t, _, _ in alts])
            self.top_lps.append([_nan_if_none(v) for _, _, v in alts])
        return bool(rows)

    def _resolved_ids(self, text_id: Callable[[str], int] | None) -> tuple[list[int], list[list[int]]]:
        """Generated ids and top-k ids of a dialect without "token_id:N" (see WireDialect.token_ids)."""
        given = self.choice_ids if len(self.choice_ids) == len(self.o_ids) else []

        def resolve(tid: int | None, text: str) -> int:
            if tid is not None:
                return tid
            if text_id is None:
                raise RequestFailed(
                    "the server returned token text without token ids, and lbeval has no tokenize endpoint "
                    "to map it",
                    retryable=False,
                )
            return text_id(text)

        ids = [
            given[i] if given else resolve(t, x)
            for i, (t, x) in enumerate(zip(self.o_ids, self.o_texts, strict=True))
        ]
        tops = [
            [resolve(t, x) for t, x in zip(row, texts, strict=True)]
            for row, texts in zip(self.o_top_ids, self.o_top_texts, strict=True)
        ]
        return ids, tops

    def response(self, timings: ClientTimings, text_id: Callable[[str], int] | None = None) -> Reply:
        u = self.usage
        cached = u.prompt_tokens_details.cached_tokens if u and u.prompt_tokens_details else None
        if cached is None and self.cache_n is not None:
            cached = self.cache_n
        if cached is None and u is not None and self.dialect.cached_absent_is_zero:
            cached = 0  # SGLang with --enable-cache-report leaves the details out when nothing was cached
        usage = Usage(
            prompt_tokens=u.prompt_tokens if u else None,
            completion_tokens=u.completion_tokens if u else None,
            cached_tokens=cached,
        )
        ids, top_ids = self.ids, self.top_ids
        if self.dialect.token_ids != "prefix":
            ids, top_ids = self._resolved_ids(text_id) if self.saw_logprobs else (self.choice_ids, [])
        topk = TopK(top_ids, self.top_lps, self.chosen) if self.saw_logprobs else None
        return Reply("".join(self.text), ids, topk, usage, timings, self.finish_reason)


def _given_id(token: str, tid: int | None) -> int | None:
    if tid is not None:
        return tid
    if token.startswith(TOKEN_ID_PREFIX) and token[9:].lstrip("-").isdigit():
        return int(token[9:])
    return None


def synthetic_token_id(text: str) -> int:
    """A stable id below 0 for a token text that is not exactly one token of the server's tokenizer."""
    return -1 - zlib.crc32(text.encode("utf-8", "surrogatepass")) % (1 << 30)


def _nan_if_none(value: float | None) -> float:
    """A missing logprob (null from the server) is kept as NaN."""
    return float("nan") if value is None else value


def parse_body(
    endpoint: str,
    raw: bytes,
    timings: ClientTimings,
    dialect: WireDialect = VLLM_WIRE,
    text_id: Callable[[str], int] | None = None,
) -> Reply:
    """Parse a whole (non-streamed) response body (`text_id`: maps a token text to its id, for dialects
    that return token text only)."""
    acc = _Accumulator(endpoint, dialect)
    try:
        acc.add(*_decode(endpoint, raw))
    except msgspec.DecodeError as exc:
        raise RequestFailed(f"unreadable response body ({exc})", retryable=True) from None
    return acc.response(timings, text_id)


def parse_stream(
    endpoint: str,
    lines: Iterator[str],
    sent_at: float,
    t0: float,
    clock: Any = time.perf_counter,
    dialect: WireDialect = VLLM_WIRE,
    text_id: Callable[[str], int] | None = None,
) -> Reply:
    """Parse server-sent events until `data: [DONE]`; the first chunk with tokens sets the TTFT."""
    acc = _Accumulator(endpoint, dialect)
    first: float | None = None
    done = False
    for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            done = True
            break
        try:
            got = acc.add(*_decode(endpoint, payload))
        except msgspec.DecodeError as exc:
            raise RequestFailed(f"unreadable stream chunk ({exc})", retryable=True) from None
        if got and first is None:
            first = clock() - t0
    if not done:
        raise RequestFailed("the stream ended before data: [DONE]", retryable=True)
    return acc.response(ClientTimings(sent_at=sent_at, first_token_s=first, done_s=clock() - t0), text_id)


# --- the whole-request deadline (see the module docstring) ---------------------------------------------------

_DEADLINE: ContextVar[float | None] = ContextVar("lbeval_request_deadline", default=None)  # time.monotonic()
_LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)  # the openai package's defaults
CONNECT_S = 10.0


def _bounded(timeout: float | None, expired: type[Exception]) -> float | None:
    """`timeout` bounded by the time left to this thread's request deadline; raises `expired` when none is."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the whole-request deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    """A connection whose every read and write waits at most until the deadline of the request using it."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        timeout = _bounded(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    """httpcore2's sync sockets, connected within the request deadline and wrapped in _DeadlineStream."""

    def __init__(self) -> None:
        self._inner = httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        timeout = _bounded(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        timeout = _bounded(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url`: HTTP_PROXY or HTTPS_PROXY (by the URL's scheme, either case),
    unless NO_PROXY (or no_proxy) lists its host (`_no_proxy`); None for a direct connection. The variables curl,
    requests and httpx read; a CIDR range in NO_PROXY is not matched."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    if not proxy or _no_proxy(parts.hostname or "", proxies.get("no", "")):
        return None
    return proxy


def _no_proxy(host: str, no_proxy: str) -> bool:
    """NO_PROXY lists `host`: `*`, the host itself, or a domain it is under (`example.com`, `.example.com`);
    a port after an entry is ignored (every port of that host)."""
    host = host.lower().strip("[]")
    for entry in no_proxy.split(","):
        name = entry.strip().lower()
        if name.count(":") == 1:  # host:port (an IPv6 address has more colons)
            name = name.split(":")[0]
        name = name.strip("[]").lstrip(".")
        if name == "*" or (name and (host == name or host.endswith("." + name))):
            return True
    return False


class _DeadlineTransport(httpx2.HTTPTransport):
    """httpx2's HTTP transport over a connection pool of _DeadlineStreams, through `proxy` when one is given
    (`environment_proxy`). httpx2 has no public way to give the pool it builds a network backend, so that pool is
    replaced by an equivalent one that has ours (httpx2 builds an HTTP proxy's pool the same way)."""

    def __init__(self, proxy: str | None = None) -> None:
        super().__init__(limits=_LIMITS)
        ssl_context = httpx2.create_ssl_context()
        if proxy is None:
            self._pool = httpcore2.ConnectionPool(
                ssl_context=ssl_context,
                max_connections=_LIMITS.max_connections,
                max_keepalive_connections=_LIMITS.max_keepalive_connections,
                keepalive_expiry=_LIMITS.keepalive_expiry,
                network_backend=_DeadlineBackend(),
            )
            return
        via = httpx2.Proxy(url=proxy)
        if via.url.scheme not in ("http", "https"):
            raise ConfigError(
                f"proxy {safe_url(proxy)} (from the environment): only http:// and https:// proxies"
            )
        self._pool = httpcore2.HTTPProxy(
            proxy_url=httpcore2.URL(
                scheme=via.url.raw_scheme, host=via.url.raw_host, port=via.url.port, target=via.url.raw_path
            ),
            proxy_auth=via.raw_auth,
            proxy_headers=via.headers.raw,
            proxy_ssl_context=via.ssl_context,
            ssl_context=ssl_context,
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
            network_backend=_DeadlineBackend(),
        )


# every read/write/pool wait is bounded by the deadline (no separate per-read timeout): such a timeout is it
_DEADLINE_ERRORS = (httpx2.ReadTimeout, httpx2.WriteTimeout, httpx2.PoolTimeout)
_TRANSPORT_ERRORS = (httpx2.TransportError, httpx2.StreamError, OSError)


# --- the client ----------------------------------------------------------------------------------------------


class SendLedger:
    """Requests sent through the Clients sharing this ledger, to any server, that may change a server's metrics
    (completions, chat, and every POST but tokenize/detokenize, e.g. a cache reset). ServerWatch reuses a
    settled /metrics scrape as the next request's "before" only while `mark()` has not moved: nothing was sent
    since, from any thread, any of those Clients, either side of `lbeval ab`. One per session (eval/run/session.py), handed
    to its Clients and its ServerWatch; `lbeval ab` hands one to both sides (two Clients can name one server
    under two URLs)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = 0
        self._finished = 0
        self._answered: dict[str, int] = {}  # server root URL -> completions/chat requests answered

    def answer(self, root: str) -> None:
        with self._lock:
            self._answered[root] = self._answered.get(root, 0) + 1

    def answered(self, root: str) -> int:
        """Completions/chat requests answered by the server at `root`, through any Client of this process
        (what its finished-requests counter will include once it has recorded them)."""
        with self._lock:
            return self._answered.get(root, 0)

    def begin(self) -> None:
        with self._lock:
            self._started += 1

    def end(self) -> None:
        with self._lock:
            self._finished += 1

    def mark(self) -> int | None:
        """The number of requests started so far; None while one is in flight."""
        with self._lock:
            return self._started if self._started == self._finished else None

    @contextmanager
    def sending(self) -> Iterator[None]:
        self.begin()
        try:
            yield
        finally:
            self.end()


_METRICS_NEUTRAL = ("/tokenize", "/detokenize")  # POST paths that send nothing to the engine


def root_url(base_url: str) -> str:
    """http://host:8000/v1 -> http://host:8000 (where vLLM serves /metrics, /version, /tokenize...)."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


class Client:
    """One server. Methods raise RequestFailed; nothing here retries (eval/run/retry.py does).

    `timeout_s` bounds each request as a whole (module docstring); `connect_s` bounds its connecting."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        connect_s: float = CONNECT_S,
        ledger: SendLedger | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.ledger = ledger if ledger is not None else SendLedger()  # what this Client sends is noted there
        self.root = root_url(self.base_url)
        self.timeout_s = timeout_s
        # sent with every request (a routing endpoint's pin, X-data-parallel-rank: eval/run/replicas.py)
        self.extra_headers = dict(extra_headers or {})
        timeout = httpx2.Timeout(timeout_s, connect=min(connect_s, timeout_s))
        proxy = environment_proxy(self.base_url)  # HTTP(S)_PROXY unless NO_PROXY names the host
        oa_http = httpx2.Client(transport=_DeadlineTransport(proxy), timeout=timeout, follow_redirects=True)
        self._oa = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or "EMPTY",
            max_retries=0,
            timeout=timeout,
            http_client=oa_http,
            default_headers=self.extra_headers or None,
        )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        headers.update(self.extra_headers)
        self._http = httpx2.Client(transport=_DeadlineTransport(proxy), timeout=timeout, headers=headers)
        self.dialect = VLLM_WIRE  # the probe sets the server kind's (eval/run/server_kinds.py)
        self.model_name = ""  # the served model (the probe sets it): `text_token_id`'s tokenize requests
        self._text_ids: dict[str, int] = {}

    def close(self) -> None:
        self._oa.close()
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _whole_request(self) -> Iterator[float]:
        """This thread's request deadline (time.monotonic()) for the `with` block: what _DeadlineStream obeys."""
        deadline = time.monotonic() + self.timeout_s
        token = _DEADLINE.set(deadline)
        try:
            yield deadline
        finally:
            _DEADLINE.reset(token)

    def _timed_out(self) -> RequestFailed:
        return RequestFailed(f"timed out after {self.timeout_s:g} s (whole request)", retryable=True)

    def _until(self, deadline: float, lines: Iterator[str]) -> Iterator[str]:
        """The stream's lines, checking the deadline between them (lines already buffered read no socket)."""
        for line in lines:
            if time.monotonic() >= deadline:
                raise self._timed_out()
            yield line

    def _transport_failure(self, exc: Exception, deadline: float) -> RequestFailed:
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) and exc.__cause__ else exc
        if isinstance(cause, _DEADLINE_ERRORS) or time.monotonic() >= deadline:
            return self._timed_out()
        if isinstance(cause, httpx2.ConnectError | ConnectionRefusedError):
            return RequestFailed(f"connection failed: {cause}", retryable=True, refused=True)
        if isinstance(exc, openai.APIConnectionError):
            return RequestFailed(f"connection failed: {cause}", retryable=True)
        return RequestFailed(f"connection lost: {type(exc).__name__}: {exc}", retryable=True)

    def send(self, endpoint: str, request: dict[str, Any]) -> Reply:
        """Send one request built by build_request; streams when request["stream"] is true.

        Streamed requests go through the typed `create(..., extra_body=...)` with a streaming raw response.
        Whole ones go through the openai client's generic `post` with the wire body (extra_body merged), which
        skips the typed-parameter transform (about a millisecond per request) and returns the raw response."""
        with self.ledger.sending():
            reply = self._send(endpoint, request)
            self.ledger.answer(self.root)
        return reply

    def _send(self, endpoint: str, request: dict[str, Any]) -> Reply:
        sent_at = time.time()
        t0 = time.perf_counter()
        with self._whole_request() as deadline:
            try:
                if request.get("stream"):
                    resource = self._oa.chat.completions if endpoint == "chat" else self._oa.completions
                    with resource.with_streaming_response.create(**request) as raw:
                        lines = self._until(deadline, raw.iter_lines())
                        return parse_stream(
                            endpoint, lines, sent_at, t0, dialect=self.dialect, text_id=self._text_id()
                        )
                resp = self._oa.post(
                    endpoint_path(endpoint), cast_to=httpx2.Response, body=wire_body(request)
                )
                done = time.perf_counter() - t0
                timings = ClientTimings(sent_at=sent_at, first_token_s=None, done_s=done)
                return parse_body(endpoint, resp.content, timings, self.dialect, self._text_id())
            except openai.APIStatusError as exc:
                raise _status_failure(exc.status_code, _error_message(exc.response.read())) from None
            except (openai.APIConnectionError, *_TRANSPORT_ERRORS) as exc:
                raise self._transport_failure(exc, deadline) from None

    # non-OpenAI endpoints

    def _call(self, method: str, url: str, body: dict[str, Any] | None = None) -> httpx2.Response:
        neutral = method == "GET" or url.endswith(_METRICS_NEUTRAL)
        with self._whole_request() as deadline, nullcontext() if neutral else self.ledger.sending():
            try:
                resp = self._http.request(method, url, json=body)
            except httpx2.TransportError as exc:
                raise self._transport_failure(exc, deadline) from None
        if resp.status_code >= 400:
            raise _status_failure(resp.status_code, _error_message(resp.content))
        return resp

    def get_json(self, path: str, *, v1: bool = False) -> Any:
        return self._call("GET", (self.base_url if v1 else self.root) + path).json()

    def post_json(self, path: str, body: dict[str, Any] | None = None) -> Any:
        resp = self._call("POST", self.root + path, body)
        return resp.json() if resp.content.strip() else None

    def metrics_text(self, names: Iterable[str] | None = None) -> str:
        """GET /metrics; with `names`, GET /metrics/?name[]=... (prometheus_client's own filter, which vLLM's
        mounted exposition app honours: a few samples instead of ~600 lines, a third of the server's time)."""
        if names is None:
            return self._call("GET", self.root + "/metrics").text
        query = urlencode([("name[]", n) for n in sorted(names)])
        return self._call("GET", f"{self.root}/metrics/?{query}").text

    def models(self) -> list[dict[str, Any]]:
        data = self.get_json("/models", v1=True)
        return list(data.get("data") or []) if isinstance(data, dict) else []

    def version(self) -> str | None:
        data = self.get_json("/version")
        return str(data.get("version")) if isinstance(data, dict) and data.get("version") else None

    def reset_prefix_cache(self) -> bool:
        """Empty the server's prefix cache the way its dialect does (WireDialect.reset); True only when the
        server says it did. vLLM: POST /reset_prefix_cache (it can answer success false); SGLang: POST
        /flush_cache (400 while requests are in flight); llama-server: erase every slot."""
        reset = self.dialect.reset
        if reset == "sglang":
            try:
                self._call("POST", self.root + "/flush_cache")
            except RequestFailed as exc:
                if exc.status == 400:
                    return False  # "the operation will not be performed" while requests run
                raise
            return True
        if reset == "llama-server":
            slots = self.get_json("/slots")
            ids = (
                [int(s["id"]) for s in slots if isinstance(s, dict) and "id" in s]
                if isinstance(slots, list)
                else [0]
            )
            for slot_id in ids or [0]:
                self._call("POST", f"{self.root}/slots/{slot_id}?action=erase")
            return True
        if reset not in ("vllm", "unknown"):
            raise RequestFailed("this server offers no prefix-cache reset", retryable=False)
        data = self.post_json("/reset_prefix_cache")
        if isinstance(data, dict) and "success" in data:
            return bool(data["success"])
        return data is None  # older vLLM: 200 with an empty body

    def _text_id(self) -> Callable[[str], int] | None:
        return self.text_token_id if self.dialect.token_ids == "text" and self.dialect.tokenize_path else None

    def text_token_id(self, text: str) -> int:
        """The id of a token text (dialects that return text only): the tokenize endpoint's one id for it, else
        `synthetic_token_id(text)` (a text that is not exactly one token, e.g. a partial UTF-8 character).
        Cached per client: a run asks once per distinct text."""
        found = self._text_ids.get(text)
        if found is not None:
            return found
        path, key = self.dialect.tokenize_path, self.dialect.tokenize_key
        body: dict[str, Any] = {key: text}
        if key == "prompt":
            body.update(model=self.model_name, add_special_tokens=False)
        try:
            ids = [int(t) for t in self.post_json(str(path), body)["tokens"]] if text else []
        except (KeyError, TypeError, ValueError):
            ids = []
        except RequestFailed as exc:
            if exc.retryable:
                raise
            ids = []
        value = ids[0] if len(ids) == 1 else synthetic_token_id(text)
        self._text_ids[text] = value
        return value

    def tokenize(
        self,
        model: str,
        *,
        prompt: str | None = None,
        messages: list[dict[str, str]] | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> list[int]:
        path, key = self.dialect.tokenize_path, self.dialect.tokenize_key
        if path is None:
            raise RequestFailed("this server offers no tokenize endpoint", retryable=False)
        if key != "prompt":  # llama-cpp-python's /extras/tokenize, llama-server's /tokenize: text only
            if messages is not None:
                raise RequestFailed(f"{path} tokenizes text only, not chat messages", retryable=False)
            return [int(t) for t in self.post_json(path, {key: prompt})["tokens"]]
        body: dict[str, Any] = {"model": model}
        if messages is not None:
            body["messages"] = messages
            body["add_generation_prompt"] = True
            if chat_template_kwargs is not None:
                body["chat_template_kwargs"] = chat_template_kwargs
        else:
            body["prompt"] = prompt
        data = self.post_json(path, body)
        return [int(t) for t in data["tokens"]]
