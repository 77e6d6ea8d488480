"""A small client of one OpenAI-compatible (vLLM) server.

`Client.send` posts a request built by `eval/run/request.py` through the openai package but reads the raw body
itself and parses it with `eval/run/wire.py`. Non-OpenAI endpoints (/metrics, /version, /tokenize,
/reset_prefix_cache) go through a plain httpx2 client. The API key is held only by the two HTTP clients. Both
run over the deadline transport (`eval/run/transport.py`): `timeout_s` bounds the WHOLE request, and the
stream parser also checks the deadline between lines; a request past its deadline fails with "timed out after
N s (whole request)", retryable like other transport failures. What a Client sends is noted in its session's
`SendLedger` (`eval/run/ledger.py`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext, suppress
from typing import Any
from urllib.parse import urlencode

import httpx2
import openai

from eval.records.types import ClientTimings
from eval.run.ledger import SendLedger
from eval.run.reply import Reply, RequestFailed, error_message, status_failure
from eval.run.request import endpoint_path, wire_body
from eval.run.transport import (
    CONNECT_S,
    DEADLINE_ERRORS,
    TRANSPORT_ERRORS,
    DeadlineTransport,
    environment_proxy,
    request_deadline,
)
from eval.run.wire import VLLM_WIRE, parse_body, parse_stream, synthetic_token_id

_METRICS_NEUTRAL = ("/tokenize", "/detokenize")  # POST paths that send nothing to the engine
DRAIN_LINES = 8  # what a stream may still send after data: [DONE] for its connection to be kept (_drain)


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
        oa_http = httpx2.Client(transport=DeadlineTransport(proxy), timeout=timeout, follow_redirects=True)
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
        self._http = httpx2.Client(transport=DeadlineTransport(proxy), timeout=timeout, headers=headers)
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

    def _whole_request(self) -> AbstractContextManager[float]:
        """This thread's request deadline for the `with` block (eval/run/transport.py)."""
        return request_deadline(time.monotonic() + self.timeout_s)

    def _timed_out(self) -> RequestFailed:
        return RequestFailed(f"timed out after {self.timeout_s:g} s (whole request)", retryable=True)

    def _until(self, deadline: float, lines: Iterator[str]) -> Iterator[str]:
        """The stream's lines, checking the deadline between them (lines already buffered read no socket)."""
        for line in lines:
            if time.monotonic() >= deadline:
                raise self._timed_out()
            yield line

    @staticmethod
    def _drain(lines: Iterator[str]) -> None:
        """Read what a stream sends after `data: [DONE]` (its last blank line and the body's end; at most
        DRAIN_LINES lines), so its connection goes back to the pool: a response closed before its end closes its
        connection, and the next request connects anew. A stream that sends more, fails or reaches the deadline
        meanwhile keeps its reply (it was whole at [DONE]); only its connection is closed."""
        with suppress(RequestFailed, *TRANSPORT_ERRORS):
            for _ in itertools.islice(lines, DRAIN_LINES):
                pass

    def _transport_failure(self, exc: Exception, deadline: float) -> RequestFailed:
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) and exc.__cause__ else exc
        if isinstance(cause, DEADLINE_ERRORS) or time.monotonic() >= deadline:
            return self._timed_out()
        if isinstance(cause, httpx2.ConnectError | ConnectionRefusedError):
            return RequestFailed(f"connection failed: {cause}", retryable=True, refused=True)
        if isinstance(exc, openai.APIConnectionError):
            return RequestFailed(f"connection failed: {cause}", retryable=True)
        return RequestFailed(f"connection lost: {type(exc).__name__}: {exc}", retryable=True)

    def send(self, endpoint: str, request: dict[str, Any]) -> Reply:
        """Send one request built by build_request; streams when request["stream"] is true.

        Both go through the openai client's generic `post` with the wire body (extra_body merged), which skips
        the typed-parameter transform (about a millisecond per request) and returns the raw response: read whole,
        or, streamed, line by line as it arrives (`_streamed`)."""
        with self.ledger.sending():
            reply = self._send(endpoint, request)
            self.ledger.answer(self.root)
        return reply

    def _send(self, endpoint: str, request: dict[str, Any]) -> Reply:
        sent_at = time.time()
        t0 = time.perf_counter()
        with self._whole_request() as deadline:
            try:
                stream = bool(request.get("stream"))
                resp: httpx2.Response = self._oa.post(
                    endpoint_path(endpoint), cast_to=httpx2.Response, body=wire_body(request), stream=stream,
                    stream_cls=None,
                )  # fmt: skip
                if stream:
                    return self._streamed(resp, endpoint, sent_at, t0, deadline)
                done = time.perf_counter() - t0
                timings = ClientTimings(sent_at=sent_at, first_token_s=None, done_s=done)
                return parse_body(endpoint, resp.content, timings, self.dialect, self._text_id())
            except openai.APIStatusError as exc:
                raise status_failure(exc.status_code, error_message(exc.response.read())) from None
            except (openai.APIConnectionError, *TRANSPORT_ERRORS) as exc:
                raise self._transport_failure(exc, deadline) from None

    def _streamed(
        self, resp: httpx2.Response, endpoint: str, sent_at: float, t0: float, deadline: float
    ) -> Reply:
        """A streamed answer, which the generic `post` returned unread (stream=True with an httpx2.Response to
        cast to): its lines parsed as they arrive, and the response closed however the parsing ends."""
        try:
            lines = self._until(deadline, resp.iter_lines())
            reply = parse_stream(endpoint, lines, sent_at, t0, dialect=self.dialect, text_id=self._text_id())
            self._drain(lines)
            return reply
        finally:
            resp.close()

    # non-OpenAI endpoints

    def _call(self, method: str, url: str, body: dict[str, Any] | None = None) -> httpx2.Response:
        neutral = method == "GET" or url.endswith(_METRICS_NEUTRAL)
        with self._whole_request() as deadline, nullcontext() if neutral else self.ledger.sending():
            try:
                resp = self._http.request(method, url, json=body)
            except httpx2.TransportError as exc:
                raise self._transport_failure(exc, deadline) from None
        if resp.status_code >= 400:
            raise status_failure(resp.status_code, error_message(resp.content))
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
