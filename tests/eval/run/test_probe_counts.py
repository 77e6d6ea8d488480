"""The probe's own count of one request's hits (eval/run/probe_counts.py), and the probe's use of it: a server
whose usage over-reports cached tokens is a finding, not a salt that leaks or a reset that fails."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from eval.records.types import Usage
from eval.run.client import Client
from eval.run.ledger import SendLedger
from eval.run.probe import USAGE_FAULT, ProbeResult, probe_server
from eval.run.probe_counts import Counted, counted, counted_together
from eval.run.request import RequestSettings
from eval.run.retry import RetryPolicy
from tests.support.fake_server import FakeServer, Fault

FAST = RetryPolicy(retries=1, backoff_s=0.01, max_backoff_s=0.02)


def _metrics(finished: float, hits: float, queries: float | None = None) -> str:
    queries = 1000 + 300 * finished if queries is None else queries  # each request: a prompt of 300 tokens
    return (
        "# TYPE vllm:request_success counter\n"
        f'vllm:request_success_total{{finished_reason="length"}} {finished}\n'
        "# TYPE vllm:prefix_cache_hits counter\n"
        f"vllm:prefix_cache_hits_total {hits}\n"
        "# TYPE vllm:prefix_cache_queries counter\n"
        f"vllm:prefix_cache_queries_total {queries}\n"
    )


class Scripted:
    """A client whose /metrics answers from a script (one text per scrape, the last repeated); also the
    ServerWatch client of tests/eval/run/test_shared_rules.py (a ledger, a root, filtered scrapes unasked)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts: Iterator[str] = iter(texts)
        self.last = texts[-1]
        self.ledger = SendLedger()
        self.root = "http://scripted"

    def metrics_text(self, names: object = None) -> str:
        self.last = next(self.texts, self.last)
        return self.last


def _count(texts: list[str], cached: int | None) -> tuple[Counted, list[float]]:
    slept: list[float] = []
    usage = Usage(prompt_tokens=300, completion_tokens=1, cached_tokens=cached)
    got = counted(Scripted(texts), FAST, lambda: usage, polls=(0.1, 0.2), sleep=slept.append)  # type: ignore[arg-type]
    return got, slept


def test_a_clean_window_gives_the_server_hits() -> None:
    got, slept = _count([_metrics(3, 100), _metrics(4, 356)], 256)
    assert got == Counted(256, 256) and not got.usage_overreports and slept == []


def test_a_lagging_finished_counter_is_waited_for() -> None:
    got, slept = _count([_metrics(3, 100), _metrics(3, 100), _metrics(4, 100)], 256)
    assert got == Counted(256, 0) and got.usage_overreports and slept == [0.1]


def test_a_window_with_two_requests_or_none_gives_no_server_count() -> None:
    assert _count([_metrics(3, 100), _metrics(5, 100)], 256)[0] == Counted(256, None)
    never, slept = _count([_metrics(3, 100)], 256)  # the counter never moved: waited, then no count
    assert never == Counted(256, None) and slept == [0.1, 0.2]
    assert not never.usage_overreports


def test_a_window_whose_queries_are_not_this_prompts_gives_no_server_count() -> None:
    """One request finished, but the queries moved by another prompt's tokens: a stranger's request was
    counted in this window while this one's lags (its 0 hits are not this request's)."""
    got, _ = _count([_metrics(3, 100), _metrics(4, 100, queries=1000 + 300 * 3 + 180)], 256)
    assert got == Counted(256, None) and not got.usage_overreports


def test_no_cached_tokens_claimed_is_never_an_overreport() -> None:
    for cached in (0, None):
        got, _ = _count([_metrics(3, 100), _metrics(4, 100)], cached)
        assert got.server_hits == 0 and not got.usage_overreports


def _probe(server: FakeServer, cold_mode: str) -> ProbeResult:
    with Client(server.base_url) as client:
        return probe_server(
            client,
            model=None,
            settings=RequestSettings(top_logprobs=5),
            modes={"chat"},
            cold_mode=cold_mode,
            policy=FAST,
        )


def test_usage_that_claims_every_hit_is_a_finding_and_the_salt_and_reset_still_check_out() -> None:
    with FakeServer(block_size=16) as server:
        server.add_fault(Fault("overreport", times=-1))
        for cold_mode in ("salt", "reset"):
            res = _probe(server, cold_mode)
            res.require()  # not refused: salts and the reset work
            assert res.salt_honored is True
            assert res.reset_prefix_cache is True
            (finding,) = res.findings
            assert finding.startswith(USAGE_FAULT) and "the server counted 0 hits" in finding


def test_a_pair_whose_usage_disagrees_with_the_servers_count_is_sent_again_alone() -> None:
    """The isolation request and the repeat go at once; usage over-reports (the isolation's miss claims a hit),
    so the pair's window cannot say whose the hits are: each is sent again alone, the isolation under another
    fresh salt (its first is cached now), and judged as when sent one after the other."""
    with FakeServer(block_size=16) as server:
        server.add_fault(Fault("overreport", times=-1))
        res = _probe(server, "salt")
        salts = [body["cache_salt"] for _, body in server.requests]
    hit_salt, pair = salts[2], salts[3:5]
    assert len(salts) == 7 and hit_salt in pair
    (isolation,) = set(pair) - {hit_salt}
    assert salts[5] not in (isolation, hit_salt, *salts[:2]) and salts[6] == hit_salt
    assert res.salt_honored is True and res.cache_model is not None and res.cache_model.source == "probe"
    (finding,) = res.findings
    assert finding.startswith(USAGE_FAULT)


def test_a_salt_that_really_leaks_is_still_the_isolation_fault() -> None:
    with FakeServer(block_size=16, honor_salt=False) as server:
        res = _probe(server, "auto")
        assert res.salt_honored is False
        assert not any(f.startswith(USAGE_FAULT) for f in res.findings)
        assert any("not honoured" in f for f in res.findings)


def test_a_request_before_it_counted_late_does_not_pass_for_its_hits() -> None:
    """The server counts each request 0.3 s after answering it (vLLM, on a loaded machine): the probe's repeat
    of the first prompt (288 hits) is still uncounted when the salted request's window opens. Its hits must
    not be taken for the salted request's (that read as a salt that leaks); the before-scrape waits for it."""
    with FakeServer(block_size=16, metrics_lag_s=0.3) as server:
        server.add_fault(Fault("overreport", times=-1))
        res = _probe(server, "salt")
        res.require()
        assert res.salt_honored is True
        (finding,) = res.findings
        assert finding.startswith(USAGE_FAULT) and "the server counted 0 hits" in finding


def test_a_before_count_that_never_comes_gives_no_server_count() -> None:
    """Every earlier request is expected counted (finished 5) but the counter stays at 3: no clean window."""
    slept: list[float] = []
    usage = Usage(prompt_tokens=300, completion_tokens=1, cached_tokens=256)
    texts = [_metrics(3, 100)] * 7 + [_metrics(4, 100)]
    got = counted(Scripted(texts), FAST, lambda: usage, polls=(0.1, 0.2), sleep=slept.append, expect=5)  # type: ignore[arg-type]
    assert got == Counted(256, None) and not got.usage_overreports and slept == [0.1, 0.2]


def _usage(cached: int | None) -> Usage:
    return Usage(prompt_tokens=300, completion_tokens=1, cached_tokens=cached)


@pytest.mark.parametrize(
    ("after", "sent", "expected"),
    [
        # two answered, the window moved by both (finished +2, queries +600) with 0 hits: 0 for each
        (_metrics(5, 100), (0, 0), [Counted(0, 0), Counted(0, 0)]),
        # usage claims hits on one, the server counted none in the whole window: that one over-reports
        (_metrics(5, 100), (0, 288), [Counted(0, 0), Counted(288, 0)]),
        # hits in a window of two, all of them the ones usage claims: each gets its usage's count
        (_metrics(5, 132), (0, 32), [Counted(0, 0), Counted(32, 32)]),
        (_metrics(5, 164), (32, 32), [Counted(32, 32), Counted(32, 32)]),
        # usage claims more than the window's hits (an over-report on a miss): whose they are is not known
        (_metrics(5, 132), (288, 32), [Counted(288, None), Counted(32, None)]),
        # usage claims fewer (an under-report of a hit): not known either
        (_metrics(5, 132), (0, 0), [Counted(0, None), Counted(0, None)]),
        # the same sum split otherwise is not told apart from the truth (the server counts only the sum)
        (_metrics(5, 132), (32, 0), [Counted(32, 32), Counted(0, 0)]),
        # one answered without a cached-token count: the sum is not known
        (_metrics(5, 132), ("unreported", 32), [Counted(None, None), Counted(32, None)]),
        # the window moved by one request only (the other not counted, or a stranger's): no count
        (_metrics(4, 100), (0, 0), [Counted(0, None), Counted(0, None)]),
        # one refused (no usage): the window is the other one's alone, its hits its own
        (_metrics(4, 132), (None, 32), [Counted(None, None), Counted(32, 32)]),
    ],
)
def test_requests_sent_together_share_one_window(
    after: str, sent: tuple[int | str | None, int | None], expected: list[Counted]
) -> None:
    usages = [None if c is None else _usage(None if c == "unreported" else int(c)) for c in sent]
    scripted: Any = Scripted([_metrics(3, 100), after])
    got = counted_together(scripted, FAST, lambda: usages, polls=(0.1,), sleep=lambda s: None)
    assert got == expected
