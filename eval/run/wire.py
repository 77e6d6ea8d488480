"""What a server sends back, decoded: the server kind's wire dialect, typed msgspec decoders of whole bodies and
stream chunks (only what lbeval keeps; msgspec skips the rest, e.g. the per-token "bytes" arrays), and the
parsers that turn them into a `Reply` (`parse_body`, `parse_stream`).

A 512-token answer with top-20 logprobs is about 1.4 MB of JSON, which pydantic models would take tens of
milliseconds to build, while a typed msgspec decode that skips what lbeval does not keep takes a few.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from eval.records.types import ClientTimings, TopK, Usage
from eval.run.reply import Reply, RequestFailed, status_failure

TOKEN_ID_PREFIX = "token_id:"


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


class Accumulator:
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
            raise status_failure(status, str(msg))
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
    acc = Accumulator(endpoint, dialect)
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
    acc = Accumulator(endpoint, dialect)
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
