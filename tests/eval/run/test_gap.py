"""The harness's own gap: one /metrics scrape serves as the after of one request and the before of the next
(ServerWatch.before/after, the session's SendLedger), never across anything else sent to a server.

The expected per-request deltas come from the fake server's own log of what each generation request added to
its metrics (FakeServer.observed: prompt tokens, cached tokens, prefill time), not from lbeval's parsing."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from bench.bench_gap import gap_stats
from eval.records.run_folder import RECORDS_NAME, scan_records
from eval.records.types import ClientTimings, RequestRecord
from eval.run.ab import AbConfig, execute_ab
from eval.run.client import Client
from eval.run.ledger import SendLedger
from eval.run.metrics_text import (
    FINISHED_COUNTER,
    PROCESS_START,
    WATCHED_SAMPLES,
    parse_metrics,
    request_deltas,
    went_backwards,
)
from eval.run.request import RequestSettings, build_request
from eval.run.runner import execute_run
from eval.run.server_watch import ServerWatch
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.eval.fake_fixtures import fake_fixture as fake_fixture  # the `fake` fixture
from tests.eval.run.test_metrics_text import BEFORE, after
from tests.support.fake_server import FakeServer, Fault


def _records(run_dir: Path) -> list[RequestRecord]:
    return sorted(scan_records(run_dir / RECORDS_NAME).records, key=lambda r: r.seq)


def _expected(fake: FakeServer, last: int) -> list[dict[str, float]]:
    """The deltas the fake's metrics went through for each of its `last` generation requests, in the order it
    recorded them (the probe's come before them)."""
    return [
        {"prefix_cache_queries": p, "prefix_cache_hits": c, "prefill_time_s": round(pre, 12), "requests": 1}
        for p, c, pre in fake.observed[-last:]
    ]


def _got(rec: RequestRecord) -> dict[str, float]:
    assert rec.server_metrics is not None, f"{rec.pass_name} {rec.repetition}: no server_metrics"
    keys = ("prefix_cache_queries", "prefix_cache_hits", "prefill_time_s", "requests")
    # the prefill time is a difference of two histogram sums: equal to the fake's value up to rounding
    return {k: round(rec.server_metrics[k], 12) for k in keys}


def _timing_run(fake: FakeServer, tmp_path: Path, n: int = 3, **kw: object) -> Path:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=40 + 20 * i) for i in range(n)])
    config = config_for(fake, inputs, tmp_path / "runs", passes=("timing",), timing_reps=2, **kw)
    return execute_run(config)


def test_the_fake_counts_a_request_one_scrape_late() -> None:
    with FakeServer(metrics_lag_scrapes=1) as fake, Client(fake.base_url) as client:
        req = build_request(make_row(1), RequestSettings(), model="fake-model", cache_salt=None, stream=False)
        client.send("chat", req)
        for _ in range(500):  # the handler notes the request just after answering it
            if fake._lagging:
                break
            time.sleep(0.01)
        assert len(fake._lagging) == 1
        seen = [parse_metrics(client.metrics_text()).counter(FINISHED_COUNTER) for _ in range(3)]
    assert [s or 0.0 for s in seen] == [0.0, 1.0, 1.0]


def test_deltas_with_reuse_equal_the_fakes_own_counters_when_metrics_lag(tmp_path: Path) -> None:
    # each request counted one scrape late (the first after-scrape misses it, whatever the machine's load):
    # every after-scrape has to settle before it can be kept
    with FakeServer(metrics_lag_scrapes=1) as fake:
        run_dir = _timing_run(fake, tmp_path)
        expected = _expected(fake, 12)
    records = _records(run_dir)
    assert len(records) == 12
    assert [_got(r) for r in records] == expected


def test_one_scrape_per_request_instead_of_two(tmp_path: Path) -> None:
    # the fake counts each request before answering it, so no after-scrape needs a second settle poll
    with FakeServer(metrics_first=True) as fake:
        seen: list[int] = []
        inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(3)])
        config = config_for(fake, inputs, tmp_path / "runs", passes=("timing",), timing_reps=2)
        run_dir = execute_run(config, on_record=lambda _rec: seen.append(fake.metrics_gets))
        assert [_got(r) for r in _records(run_dir)] == _expected(fake, 12)
    # 12 requests: from the first record to the last, exactly one /metrics GET per request (was two)
    assert seen[-1] - seen[0] == 11


def test_no_reuse_across_a_request_sent_through_another_client(tmp_path: Path) -> None:
    """After every record, another Client on the session's send ledger (the other side of an A/A) sends a
    request to the same server: each next request's deltas must still be its own (a reused before would add the
    stranger's). The fake counts each request one scrape late: the next before must also wait for the
    stranger."""
    ledger = SendLedger()
    with FakeServer(metrics_lag_scrapes=1) as fake, Client(fake.base_url, ledger=ledger) as other:
        stranger = make_row(99, words=25)
        req = build_request(stranger, RequestSettings(), model="fake-model", cache_salt=None, stream=False)
        strangers: list[int] = []

        def interfere(rec: RequestRecord) -> None:
            strangers.append(len(fake.observed))
            other.send("chat", req)

        inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(2)])
        config = config_for(fake, inputs, tmp_path / "runs", passes=("timing",), timing_reps=2)
        records = _records(execute_run(config, on_record=interfere, ledger=ledger))
        everything = _expected(fake, len(fake.observed))
    assert len(records) == 8 and len(strangers) == 8
    own = [e for i, e in enumerate(everything) if i not in strangers][-8:]  # the strangers' left out
    assert [_got(r) for r in records] == own


def test_no_reuse_across_the_two_sides_of_an_aa_session_on_one_server(tmp_path: Path) -> None:
    # counted before answering: a side's first (fresh) before then sees the other side's probe requests too
    with FakeServer(metrics_first=True) as fake:
        inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=30 + 15 * i) for i in range(3)])
        ca = config_for(fake, inputs, tmp_path / "runs", variant="x", passes=("timing",), timing_reps=2)
        da, db = execute_ab(AbConfig(ca, replace(ca), seed=5, quiet=True))
    both = sorted(_records(da) + _records(db), key=lambda r: r.timings.sent_at if r.timings else 0.0)
    assert len(both) == 24
    assert [_got(r) for r in both] == _expected(fake, 24)


def test_the_ledger_moves_with_every_engine_request_and_not_with_tokenize(fake: FakeServer) -> None:
    ledger = SendLedger()  # injected: nothing else in the process moves it
    with Client(fake.base_url, ledger=ledger) as client, Client(fake.base_url) as other:
        assert ledger.mark() == 0 and client.ledger is ledger and other.ledger is not ledger
        client.tokenize("fake-model", prompt="a b c")
        client.metrics_text()
        assert ledger.mark() == 0
        client.reset_prefix_cache()
        assert ledger.mark() == 1
        req = build_request(make_row(1), RequestSettings(), model="fake-model", cache_salt=None, stream=True)
        client.send("chat", req)
        assert ledger.mark() == 2 and ledger.answered(client.root) == 1
        assert ledger.answered("http://127.0.0.1:1") == 0  # per server
        other.send("chat", req)  # a Client with its own ledger: not this one's
        assert ledger.mark() == 2 and ledger.answered(client.root) == 1 and other.ledger.mark() == 1
        with Client(fake.base_url, ledger=ledger) as shared:  # a second Client on the session's ledger
            shared.send("chat", req)
        assert ledger.mark() == 3 and ledger.answered(client.root) == 2


def test_a_watch_scrape_parses_only_what_the_deltas_read_and_gives_the_same_deltas() -> None:
    b_full, a_full = parse_metrics(BEFORE), parse_metrics(after(1500.0, 640.0, 6.0, 12.0))
    b_kept = parse_metrics(BEFORE, names=WATCHED_SAMPLES)
    a_kept = parse_metrics(after(1500.0, 640.0, 6.0, 12.0), names=WATCHED_SAMPLES)
    assert request_deltas(b_kept, a_kept) == request_deltas(b_full, a_full)
    assert request_deltas(b_kept, a_kept)["prefix_cache_hits"] == 384.0  # 640 - 256, by hand
    assert request_deltas(b_kept, a_kept)["prefill_time_s"] == 1.5  # 12.0 - 10.5, one observation added
    assert a_kept.counter(FINISHED_COUNTER) == 5.0 and a_kept.total(PROCESS_START) == 1.7e9
    assert "vllm:request_prefill_time_seconds_bucket" not in b_kept.samples
    assert "vllm:cache_config_info" not in b_kept.samples
    restarted = parse_metrics(after(10.0, 0.0, 1.0, 0.5, start="1.8e9"), names=WATCHED_SAMPLES)
    assert went_backwards(b_kept, restarted)


def test_a_retried_request_s_after_is_not_reused(tmp_path: Path) -> None:
    """A request sent twice (a 503, then the retry) may be counted twice or late by a real server: the next
    request scrapes afresh (two GETs between its record and the one before, where every other takes one)."""
    with FakeServer(metrics_first=True) as fake:
        fake.add_fault(Fault("5xx", match="ex1:", salt_seen=0))  # ex1's first timing_cold, once
        seen: list[int] = []
        inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(3)])
        config = config_for(fake, inputs, tmp_path / "runs", passes=("timing",), timing_reps=2)
        records = _records(execute_run(config, on_record=lambda _rec: seen.append(fake.metrics_gets)))
        assert [_got(r) for r in records] == _expected(fake, 12)
    retried = [i for i, r in enumerate(records) if r.retries]
    assert retried == [4]  # ex1 timing_cold 0: records of ex0 (2 reps x 2) come first
    steps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
    assert steps[retried[0]] == 2 and steps.count(1) == len(steps) - 1


def test_bench_gap_figures_from_record_timings() -> None:
    # requests at t=100.000 (10 ms), 100.030 (20 ms), 100.060 (5 ms), given out of order: gaps 20 and 10 ms
    base = _records_for_bench()
    stats = gap_stats(base)
    assert stats.requests == 3
    assert stats.median_ms == pytest.approx(15.0) and stats.max_ms == pytest.approx(20.0)
    assert stats.p90_ms == pytest.approx(19.0)  # 10 + 0.9 * (20 - 10), numpy's linear quantile
    assert stats.busy_s == pytest.approx(0.035) and stats.span_s == pytest.approx(0.065)


def _records_for_bench() -> list[RequestRecord]:
    rec = RequestRecord(
        run_id="r", variant="v", dataset="qasper", example_id="e", pass_name="timing_cold", repetition=0,
        attempt=0, seq=0, group=0, endpoint="chat", settings={}, cache_salt=None, prompt_sha256="", status="ok",
    )  # fmt: skip
    sends = ((100.060, 0.005), (100.000, 0.010), (100.030, 0.020))
    return [replace(rec, seq=i, timings=ClientTimings(t, None, d)) for i, (t, d) in enumerate(sends)]


def test_the_filtered_metrics_is_scraped_when_it_has_every_watched_sample(tmp_path: Path) -> None:
    # like vLLM's mounted prometheus app: /metrics/?name[]=... answers those samples only
    with FakeServer(metrics_filter=True, metrics_first=True) as fake:
        seen: list[tuple[int, int]] = []
        inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(3)])
        config = config_for(fake, inputs, tmp_path / "runs", passes=("timing",), timing_reps=2)
        on = lambda _rec: seen.append((fake.metrics_gets, fake.metrics_filtered_gets))  # noqa: E731
        records = _records(execute_run(config, on_record=on))
        assert [_got(r) for r in records] == _expected(fake, 12)
    # after the first record, every scrape is the filtered one: one per request
    assert seen[-1][0] - seen[0][0] == 11 and seen[-1][1] - seen[0][1] == 11


def test_a_server_without_the_filter_is_scraped_whole(tmp_path: Path) -> None:
    with FakeServer(metrics_first=True) as fake:  # /metrics/?name[]=... answers 404
        run_dir = _timing_run(fake, tmp_path)
        assert [_got(r) for r in _records(run_dir)] == _expected(fake, 12)
        assert fake.metrics_filtered_gets == 0 and fake.metrics_gets >= 13


class _Filtering:
    """Stands in for Client: the filtered /metrics lacks the process start time the full one has."""

    def __init__(self) -> None:
        self.calls: list[bool] = []  # filtered?
        self.ledger = SendLedger()

    def metrics_text(self, names: object = None) -> str:
        self.calls.append(names is not None)
        full = 'vllm:request_success_total{finished_reason="stop"} 3.0\nprocess_start_time_seconds 7.0\n'
        return full.splitlines(keepends=True)[0] if names is not None else full


def test_a_filter_that_drops_a_watched_sample_is_not_used() -> None:
    stub = _Filtering()
    watch = ServerWatch(stub, metrics=True, start_time=7.0, finished=3.0, filtered=None)  # type: ignore[arg-type]
    first, second = watch.scrape(), watch.scrape()
    assert stub.calls == [False, True, False, False]  # the check (full, filtered), then the full text
    assert first is not None and second is not None and second.total(PROCESS_START) == 7.0
