"""A request's outcome: the `Reply` a server gave, or `RequestFailed` (with whether to retry), and the failure an
HTTP error status and its body make."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from eval.records.types import ClientTimings, TopK, Usage


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


def status_failure(status: int, message: str) -> RequestFailed:
    retryable = status >= 500 or status in (408, 409, 429)
    return RequestFailed(f"HTTP {status}: {message}", status=status, retryable=retryable)


def error_message(body: bytes) -> str:
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
