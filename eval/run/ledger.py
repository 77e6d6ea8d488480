"""The send ledger: what the Clients of one session sent that may change a server's metrics (one per session)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


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
