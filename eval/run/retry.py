"""The one retry loop of the run stage: bounded retries with exponential backoff, for requests and the probe.

What is retryable is decided where a failure is made (`RequestFailed.retryable` in eval/run/reply.py:
connection errors, whole-request timeouts, 5xx, 408/409/429, torn bodies and streams); how often and how long
to wait is `RetryPolicy` (`--retries`, `--backoff`). `with_retries` applies both to any call that raises
RequestFailed and returns what happened: the value, or the last failure with the number of attempts made;
`send_with_retries` applies it to one request sent through a Client.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from eval.errors import LbevalError
from eval.run.client import Client
from eval.run.reply import Reply, RequestFailed

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 4  # transport retries after the first try
    backoff_s: float = 1.0  # first wait; doubles each time
    max_backoff_s: float = 30.0

    def wait(self, attempt: int) -> float:
        return float(min(self.max_backoff_s, self.backoff_s * 2.0**attempt))


@dataclass(frozen=True)
class Retried(Generic[T]):
    """The outcome of `with_retries`: `failure` is None when `value` is the call's result."""

    value: T | None
    failure: RequestFailed | None
    attempts: int  # tries made (1 + retries)
    refused: bool  # a connection was refused on the way (the server was down)

    def result(self) -> T:
        """The value, or the last failure raised."""
        if self.failure is not None:
            raise self.failure
        return cast(T, self.value)


def with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
    stop: threading.Event | None = None,
) -> Retried[T]:
    """Call; on a retryable RequestFailed wait `policy.wait(attempt)` and call again, at most policy.retries
    times. A failure that is not retryable ends at once; so does any failure once `stop` is set."""
    refused = False
    for attempt in range(policy.retries + 1):
        try:
            return Retried(call(), None, attempt + 1, refused)
        except RequestFailed as exc:
            refused = refused or exc.refused
            last = attempt == policy.retries or (stop is not None and stop.is_set())
            if not exc.retryable or last:
                return Retried(None, exc, attempt + 1, refused)
        sleep(policy.wait(attempt))
    raise AssertionError("unreachable")


@dataclass
class SendOutcome:
    response: Reply | None
    failure: RequestFailed | None
    retries: int
    refused: bool  # a connection was refused on the way (the server was down)


def send_with_retries(
    client: Client,
    endpoint: str,
    request: dict[str, Any],
    policy: RetryPolicy,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    stop: threading.Event | None = None,
) -> SendOutcome:
    """Send with `with_retries` (eval/run/retry.py); a 4xx (or an unusable answer) stops the run.

    No retry once `stop` is set (the run is being interrupted)."""
    out = with_retries(lambda: client.send(endpoint, request), policy, sleep, stop)
    if out.failure is not None and not out.failure.retryable:
        raise LbevalError(f"the server rejected {what}: {out.failure.message}")
    return SendOutcome(out.value, out.failure, out.attempts - 1, out.refused)
