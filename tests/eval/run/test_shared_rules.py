"""The two users of each shared /metrics rule give the same answer on the same counters, so they cannot drift:

- the settle (eval/run/server_watch.settle): ServerWatch.after and the probe's `counted` (eval/run/probe_counts.py)
  stop waiting at the same scrape, the one whose finished-requests counter first reaches the request's;
- the clean window (eval/records/server_figures.window_reasons): a record's figure_check and the probe's
  `counted` accept the same windows (one request finished, the queries moved by its prompt tokens).

The expected scrape and the expected verdict of every row are written by hand from the row's counters.
"""

from __future__ import annotations

import pytest

from eval.records.server_figures import figure_check
from eval.records.types import Usage
from eval.run.metrics_text import FINISHED_COUNTER, Snapshot, parse_metrics, request_deltas
from eval.run.probe_counts import counted
from eval.run.retry import RetryPolicy
from eval.run.server_watch import ServerWatch, Settled, settle
from tests.eval.run.test_probe_counts import Scripted

FAST = RetryPolicy(retries=0, backoff_s=0.01, max_backoff_s=0.02)
PROMPT = 300
BAD = "BAD"  # a scrape that cannot be parsed (a failed scrape)
NO_COUNTER = "NO_COUNTER"  # a scrape without the finished-requests counter


def _text(finished: float, hits: float, queries: float | None = None) -> str:
    """/metrics with `finished` requests finished (each a prompt of PROMPT tokens unless `queries` says)."""
    queries = 1000 + PROMPT * finished if queries is None else queries
    return (
        f'vllm:request_success_total{{finished_reason="stop"}} {finished}\n'
        f"vllm:prefix_cache_hits_total {hits}\nvllm:prefix_cache_queries_total {queries}\n"
    )


def _scripted(finished: float | str, hits: float) -> str:
    if finished == BAD:
        return 'vllm:request_success_total{finished_reason="stop" 1\n'
    if finished == NO_COUNTER:
        return f"vllm:prefix_cache_hits_total {hits}\n"
    assert isinstance(finished, float | int)
    return _text(finished, hits)


def _probe(texts: list[str], cached: int = 0) -> int | None:
    usage = Usage(prompt_tokens=PROMPT, completion_tokens=1, cached_tokens=cached)
    client = Scripted(texts)
    return counted(client, FAST, lambda: usage, polls=(0.0,) * 8, sleep=lambda _: None).server_hits  # type: ignore[arg-type]


def _watch_after(before: str, afters: list[str]) -> Snapshot | None:
    watch = ServerWatch(
        Scripted(afters), metrics=True, start_time=None, finished=None, wait_s=0.3, polls_s=(0.001,)
    )  # type: ignore[arg-type]
    return watch.after(parse_metrics(before), answered=True)


# after-scrapes (finished count each; the before has 3) -> the scrape, counted from 1, the settle stops at
SETTLE_ROWS = [
    ([4], 1),
    ([3, 3, 4], 3),
    ([3, BAD, 4], 3),  # a failed scrape: the wait goes on
    ([3, NO_COUNTER, 4], 3),  # a scrape without the counter counts 0: the wait goes on
    ([3, 3, 3], None),  # never counted: the waits run out
    ([BAD], None),  # the first after-scrape failed: no wait
]


@pytest.mark.parametrize(("finished", "stops_at"), SETTLE_ROWS)
def test_the_watch_and_the_probe_stop_waiting_at_the_same_scrape(
    finished: list[float | str], stops_at: int | None
) -> None:
    before = _text(3, 0)
    afters = [_scripted(f, i) for i, f in enumerate(finished, start=1)]
    snap = _watch_after(before, afters)
    settled = snap is not None and (snap.counter(FINISHED_COUNTER) or 0.0) >= 4
    watch_at = snap.counter("vllm:prefix_cache_hits") if settled and snap is not None else None
    assert watch_at == stops_at
    assert _probe([before, *afters]) == stops_at  # hits moved by the index of the scrape it stopped at


def test_settle_waits_the_polls_once_without_a_deadline_and_repeats_the_last_until_one() -> None:
    never = parse_metrics(_text(3, 0))
    slept: list[float] = []
    got = settle(lambda: never, 4.0, (0.1, 0.2), None, slept.append)
    assert slept == [0.1, 0.2] and got.ran_out and not got.counted and got.snap is never
    slept.clear()
    got = settle(lambda: never, 4.0, (0.1, 0.2), 0.02, slept.append)
    assert slept[:2] == [0.1, 0.2] and set(slept[2:]) <= {0.2} and got.ran_out
    # no target, or a first scrape that failed: no wait, and not a wait that ran out
    slept.clear()
    assert settle(lambda: never, None, (0.1,), None, slept.append) == Settled(never, False, False)
    assert settle(lambda: None, 4.0, (0.1,), 1.0, slept.append) == Settled(None, False, False) and slept == []
    assert settle(lambda: never, 3.0, (0.1,), 1.0) == Settled(never, True, False)


# (finished, prefix-cache queries) moved in the window -> whether it is one request's of PROMPT prompt tokens
WINDOW_ROWS = [
    (1, PROMPT, True),
    (2, 2 * PROMPT, False),  # another request counted too
    (1, PROMPT + 180, False),  # another's prompt counted, this one's lags
    (1, 0, False),
    (2, PROMPT, False),
    (3, 3 * PROMPT, False),
]


@pytest.mark.parametrize(("finished", "queries", "clean"), WINDOW_ROWS)
def test_figure_check_and_the_probe_accept_the_same_windows(finished: int, queries: int, clean: bool) -> None:
    before, after = _text(3, 100, queries=1900), _text(3 + finished, 100 + 256, queries=1900 + queries)
    usage = Usage(prompt_tokens=PROMPT, completion_tokens=1, cached_tokens=256)
    record = figure_check(request_deltas(parse_metrics(before), parse_metrics(after)), usage)
    assert (record.foreign is None) is clean
    assert _probe([before, after], cached=256) == (256 if clean else None)


def test_a_window_in_which_no_request_finished_is_no_ones() -> None:
    before = _text(3, 100)
    usage = Usage(prompt_tokens=PROMPT, completion_tokens=1, cached_tokens=0)
    assert (
        figure_check(request_deltas(parse_metrics(before), parse_metrics(before)), usage).foreign is not None
    )
    assert _probe([before, before]) is None
