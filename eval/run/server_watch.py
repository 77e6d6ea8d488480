"""Watching the server under test through /metrics: restarts (the process start time or a counter went back, a
connection refused) and the per-request deltas of one request at concurrency 1, scraped once per request when
the session's send ledger shows nothing else was sent in between."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eval.run.client import Client
from eval.run.ledger import SendLedger
from eval.run.metrics_text import (
    FINISHED_COUNTER,
    PROCESS_START,
    WATCHED_SAMPLES,
    Snapshot,
    parse_metrics,
    went_backwards,
)
from eval.run.reply import RequestFailed

# ServerWatch: waits between /metrics scrapes until a request is counted (the last repeats). Most answers are
# counted by the first scrape after them; the rest within a few ms (vLLM records just after answering)
SETTLE_POLLS_S = (0.002, 0.005, 0.01)


@dataclass(frozen=True)
class Settled:
    snap: Snapshot | None  # the last snapshot (a failed scrape keeps the one before it)
    counted: bool  # the finished-requests counter reached the target
    ran_out: bool  # not counted: the waits ran out while there were a snapshot and a target


def settle(
    scrape: Callable[[], Snapshot | None],
    target: float | None,
    polls_s: Sequence[float],
    deadline_s: float | None,
    sleep: Callable[[float], None] = time.sleep,
) -> Settled:
    """Scrape until the finished-requests counter reaches `target` (vLLM counts a request just after answering
    it; a snapshot without the counter counts 0). Between scrapes it waits `polls_s` in turn: with `deadline_s`
    the last wait repeats until `deadline_s` seconds have passed since the first scrape, without one the waits
    end with `polls_s`. A failed scrape (None) keeps the snapshot before it; a first scrape that fails, or no
    target, ends the wait at once. ServerWatch's settle and the probe's (eval/run/probe_counts.py)."""
    snap = scrape()
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    waits = iter(polls_s)
    while snap is not None and target is not None:
        if (snap.counter(FINISHED_COUNTER) or 0.0) >= target:
            return Settled(snap, True, False)
        wait = next(waits, None if deadline is None else polls_s[-1])
        if wait is None or (deadline is not None and time.monotonic() >= deadline):
            return Settled(snap, False, True)
        sleep(wait)
        snap = scrape() or snap
    return Settled(snap, False, False)


@dataclass(frozen=True)
class Seen:
    finished: float  # the finished-requests counter of a settled after-snapshot
    answered: int  # ledger.answered(server) when that request had been answered


class ServerWatch:
    """Notices server restarts (`epoch` increases when the metrics go back or a connection is refused) and
    waits for the server's counters to include every request sent (vLLM records them just after answering).

    Per-request metrics (`before` / `after` around one request at concurrency 1): a settled after-snapshot is
    kept and serves as the next request's before, one scrape instead of two, only while the session's send ledger
    (`ledger`, default: the client's) shows that nothing was sent since by this session (any of its Clients, any thread, either side of `lbeval ab`, a reset, an
    eviction or re-prime prompt, a scenario batch); anything else gets a fresh scrape."""

    def __init__(
        self,
        client: Client,
        metrics: bool,
        start_time: float | None,
        finished: float | None,
        wait_s: float = 2.0,
        polls_s: tuple[float, ...] = SETTLE_POLLS_S,
        filtered: bool | None = False,
        ledger: SendLedger | None = None,
    ) -> None:
        self.client = client
        self.ledger = ledger if ledger is not None else client.ledger
        self.metrics = metrics
        self.epoch = 0
        self.start_time = start_time
        self.finished = finished  # vllm:request_success once every request sent so far is counted
        self.wait_s = wait_s
        self.polls_s = polls_s  # waits between settle scrapes; the last one repeats
        self._last: Snapshot | None = None
        self._kept: Snapshot | None = None
        self._kept_mark: int | None = None
        self._seen: Seen | None = None  # the last settled after: its finished count, ledger.answered then
        self._filtered = filtered  # scrape the filtered /metrics (None: find out whether it has every sample)
        self._lock = threading.Lock()
        # the last request's figures were not its own (window_checked; eval/records/server_figures.py)
        self.last_foreign = False

    def scrape(self) -> Snapshot | None:
        if not self.metrics:
            return None
        try:
            if self._filtered is None:
                self._filtered = self._filter_works()
            text = self.client.metrics_text(WATCHED_SAMPLES) if self._filtered else self.client.metrics_text()
            return parse_metrics(text, names=WATCHED_SAMPLES)
        except (RequestFailed, ValueError):
            return None

    def _filter_works(self) -> bool:
        """Whether the server's filtered /metrics (Client.metrics_text(names)) has every watched sample, with
        the same label sets, that its full /metrics has (vLLM: yes; a server that 404s or drops one: the full
        text is scraped instead, on every request)."""
        full = parse_metrics(self.client.metrics_text(), names=WATCHED_SAMPLES)
        try:
            part = parse_metrics(self.client.metrics_text(WATCHED_SAMPLES), names=WATCHED_SAMPLES)
        except (RequestFailed, ValueError):
            return False
        return full.shape() == part.shape()

    def _settle(self, target: float | None) -> Settled:
        got = settle(self.scrape, target, self.polls_s, self.wait_s)
        if got.ran_out and got.snap is not None:
            # never counted (aborted?): stop waiting for it on every request
            self.finished = got.snap.counter(FINISHED_COUNTER) or 0.0
        return got

    def before(self) -> Snapshot | None:
        """The snapshot a request's deltas start from: the kept after-snapshot of the request just before it
        when nothing was sent since, else a scrape settled until the server counts the requests this process
        had answered by it since this watch's last settled after (another side's, an eviction or re-prime
        prompt), as well as the run's own."""
        kept, self._kept = self._kept, None
        if kept is not None and self._kept_mark is not None and self.ledger.mark() == self._kept_mark:
            return kept
        target = self.finished
        if target is not None and self._seen is not None:
            since = self.ledger.answered(self.client.root) - self._seen.answered
            target = max(target, self._seen.finished + since)
        return self._settle(target).snap

    def after(
        self, before: Snapshot | None, answered: bool, keep: bool = True, requests: int = 1
    ) -> Snapshot | None:
        """The snapshot after a request (or `requests` sent together, all answered): settled until the finished
        counter is `requests` past `before`'s (the requests counted; the run's own count when `before` has
        none). Kept for the next `before` only when `keep` (the request was sent once: a retried one may be
        counted twice or late), it settled, and nothing was sent, or in flight, while it was taken."""
        self._kept = None
        if not answered:
            return self.scrape()
        mark, done = self.ledger.mark(), self.ledger.answered(self.client.root)
        counted = before.counter(FINISHED_COUNTER) if before is not None else None
        got = self._settle(counted + requests if counted is not None else self.finished)
        if got.counted and got.snap is not None:
            self._seen = Seen(got.snap.counter(FINISHED_COUNTER) or 0.0, done)
            if keep and mark is not None and self.ledger.mark() == mark:
                self._kept, self._kept_mark = got.snap, mark
        return got.snap

    def window_checked(self, foreign: bool, own_missing: bool) -> None:
        """The per-request check of the window just closed. A foreign window's after-snapshot is not reused as
        the next before; when one request was counted in it and it was not this one (`own_missing`: another
        took its place, this one's count lags), the next before also waits for one more finished request, so
        that the lagging count does not land in the next request's window."""
        with self._lock:
            self.last_foreign = foreign
            if not foreign:
                return
            self._kept = None
            if own_missing and self._seen is not None:
                self._seen = Seen(self._seen.finished + 1, self._seen.answered)

    def request_done(self) -> None:
        with self._lock:
            if self.finished is not None:
                self.finished += 1

    def check(self, refused: bool = False) -> int:
        """Scrape and observe under the lock: scrapes from several threads stay in order."""
        with self._lock:
            return self._observe(self.scrape(), refused)

    def observe(self, snap: Snapshot | None, refused: bool = False) -> int:
        with self._lock:
            return self._observe(snap, refused)

    def _observe(self, snap: Snapshot | None, refused: bool) -> int:
        changed = refused
        if snap is not None:
            if self._last is not None and went_backwards(self._last, snap):
                changed = True
                self.finished = snap.counter(FINISHED_COUNTER)  # a new process counts from zero
            self._last = snap
            self.start_time = snap.total(PROCESS_START)
        if changed:
            self.epoch += 1
            self._kept = self._seen = None  # a new process: nothing before it describes it
        return self.epoch
