"""Foreign server figures: a record's /metrics deltas are used only when they are its own.

Two clients on one fake server whose metrics lag 20 ms behind each answer: the second client (another lbeval
process, as far as the server can tell) sends long uncached prompts while the run measures. Each kept figure
must be the request's own (the fake's prefill formula on the record's own usage), and a 3x slower variant must
FAIL warm_prefill_change (before the check it passed, at about -87%: base warm windows carried the stranger's
cold prefills)."""

from __future__ import annotations

import json
import random
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main
from eval.records.codec import dumps_record, record_from_dict
from eval.records.run_folder import RECORDS_NAME, scan_records
from eval.records.server_figures import figure_check
from eval.records.types import RequestRecord, Usage
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from eval.run.request import RequestSettings, build_request
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.eval.records.test_run_folder import make_record
from tests.support.fake_server import FakeServer, Fault

LAG_S = 0.02


def _records(run_dir: Path) -> list[RequestRecord]:
    return sorted(scan_records(run_dir / RECORDS_NAME).records, key=lambda r: r.seq)


def _fake_prefill(rec: RequestRecord, slowdown: float = 1.0) -> float:
    """tests/support/fake_server.FakeServer.observe's prefill time for this record's own prompt and cached tokens."""
    assert rec.usage.prompt_tokens is not None and rec.usage.cached_tokens is not None
    return (1e-4 + (rec.usage.prompt_tokens - rec.usage.cached_tokens) * 1e-5) * slowdown


def _send_stranger(fake: FakeServer, row: dict[str, Any], salt: str) -> None:
    # plain HTTP, not eval.run.client: this process's ledger of requests sent does not see it (as it does not
    # see another lbeval process's)
    req = build_request(row, RequestSettings(), model="fake-model", cache_salt=salt, stream=False)
    body = json.dumps({**req, "max_tokens": 1}).encode()
    post = urllib.request.Request(
        f"{fake.base_url}/chat/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(post, timeout=10) as answer:
        answer.read()


STRANGER_ROW = make_row(900, words=800)
STRANGER_TOKENS = 800  # the stranger's prompt is longer than this; every run row here is far shorter


def _stranger_counted(fake: FakeServer) -> int:
    with fake.lock:
        return sum(prompt > STRANGER_TOKENS for prompt, _, _ in fake.observed)


@contextmanager
def stranger_alongside(fake: FakeServer, share: float, seed: int = 11) -> Iterator[set[str]]:
    """A second client sending one long uncached prompt from the fake's on_request hook: a seeded `share` of the
    run's cache salts is chosen as each first arrives (the probe's aside), and before every request with a
    chosen salt is served the stranger is sent, answered and counted in the server's lagging figures, so it
    lands in that request's measured window whatever the machine's load. Yields the chosen salts."""
    rng = random.Random(seed)
    decided: dict[str, bool] = {}
    chosen: set[str] = set()

    def arrived(body: dict[str, Any]) -> None:
        salt = str(body.get("cache_salt") or "")
        if not salt.startswith("lbeval-") or salt.startswith("lbeval-probe-"):
            return
        if decided.setdefault(salt, rng.random() < share):
            before = _stranger_counted(fake)
            _send_stranger(fake, STRANGER_ROW, f"stranger-{before}")
            deadline = time.monotonic() + 30  # a guard, never a window: the count is an event to wait for
            while _stranger_counted(fake) == before:
                assert time.monotonic() < deadline, "the fake never counted the stranger's request"
                time.sleep(0.001)
            chosen.add(salt)

    fake.on_request = arrived
    try:
        yield chosen
    finally:
        fake.on_request = None


# ---------------------------------------------------------------- the check itself (golden values by hand)


def test_figure_check_names_every_counter_that_moved_by_more_than_the_request() -> None:
    usage = Usage(prompt_tokens=70, completion_tokens=1, cached_tokens=64)
    own = {"finished": 1.0, "requests": 1.0, "prefix_cache_queries": 70.0, "prefix_cache_hits": 64.0}
    assert figure_check(own, usage).foreign is None and figure_check(own, usage).finding is None
    two = {**own, "finished": 2.0, "requests": 2.0, "prefix_cache_queries": 140.0}
    reason = figure_check(two, usage).foreign
    assert (
        reason is not None and "finished requests moved by 2" in reason and "queries moved by 140" in reason
    )
    # one request counted, but not this one (another prompt's length): foreign
    other = {**own, "prefix_cache_queries": 810.0, "prefix_cache_hits": 0.0}
    assert figure_check(other, usage).foreign is not None and figure_check(other, usage).finding is None
    # the histograms moved by different counts (one observation lagging)
    assert figure_check({**own, "observations_differ": 1.0}, usage).foreign is not None
    # no figures at all: nothing to judge
    assert figure_check(None, usage) == figure_check(None, Usage())


def test_a_clean_window_whose_hits_differ_from_usage_is_a_finding() -> None:
    over = Usage(prompt_tokens=70, completion_tokens=1, cached_tokens=64)  # usage claims 64 cached
    window = {"finished": 1.0, "requests": 1.0, "prefix_cache_queries": 70.0, "prefix_cache_hits": 0.0}
    check = figure_check(window, over)
    assert check.finding == "usage reports 64 cached tokens, the server counted 0 hits"
    assert check.foreign is not None  # which report is wrong cannot be told: not used for timing either


def test_old_records_get_the_check_from_their_stored_deltas() -> None:
    deltas = {
        "prefill_time_s": 0.0087,
        "requests": 1.0,
        "prefix_cache_queries": 140.0,
        "prefix_cache_hits": 64.0,
    }
    rec = make_record(usage=Usage(70, 1, 64), server_metrics=deltas)
    obj = json.loads(dumps_record(rec))
    assert "server_foreign" not in obj  # the record was built without a check: nothing written
    obj["schema_version"] = 2
    del obj["replica"]  # a version 2 line has no replica either (schema 3 added it too)
    back = record_from_dict(obj)
    assert back.server_foreign is not None and "queries moved by 140" in back.server_foreign
    clean = record_from_dict({**obj, "server_metrics": {**deltas, "prefix_cache_queries": 70.0}})
    assert clean.server_foreign is None
    # version 3 writes the field and reads it back as written
    marked = replace(rec, server_foreign="x", cache_finding="y")
    again = record_from_dict(json.loads(dumps_record(marked)))
    assert (again.server_foreign, again.cache_finding) == ("x", "y")
    with pytest.raises(ValueError, match="unknown field 'server_foreign'"):
        record_from_dict({**obj, "server_foreign": "x"})  # a version 2 line never had it


# ---------------------------------------------------------------- two clients on one fake server


def test_two_clients_on_one_server_keep_no_foreign_figure(tmp_path: Path) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=40 + 4 * i) for i in range(10)])
    with FakeServer(metrics_lag_s=LAG_S) as fake, stranger_alongside(fake, share=1 / 2) as hit:
        config = config_for(fake, inputs, tmp_path / "runs", passes=("timing",), timing_reps=2)
        records = _records(execute_run(config))
    with_figures = [r for r in records if r.status == "ok" and r.server_metrics]
    kept = [r for r in with_figures if r.server_foreign is None]
    foreign = [r for r in with_figures if r.server_foreign is not None]
    # the stranger ran inside these requests' windows: each of their figures must be marked foreign
    landed = [r for r in with_figures if r.cache_salt in hit]
    assert 5 <= len(landed) < len(with_figures) and len(hit) < len({r.cache_salt for r in records})
    assert [r.seq for r in landed if r.server_foreign is None] == []
    # the fake's usage never lies: no finding, although lagging counts of the same prompt (a timing_cold's, in
    # its timing_warm's window) look like one when taken alone
    assert [r.cache_finding for r in records if r.cache_finding is not None] == []
    assert kept, "every figure was foreign: nothing left to check"
    for r in kept:  # every kept figure is its own request's: the fake's formula on its own usage
        assert r.server_metrics is not None
        assert r.server_metrics["prefill_time_s"] == pytest.approx(_fake_prefill(r), rel=1e-9, abs=1e-12)
        assert r.server_metrics["prefix_cache_queries"] == r.usage.prompt_tokens
    # the foreign ones did carry someone else's figures (the check is not just discarding at random)
    assert any(
        "prefill_time_s" in (r.server_metrics or {})
        and (r.server_metrics or {})["prefill_time_s"] != pytest.approx(_fake_prefill(r), rel=1e-9)
        for r in foreign
    ) or any((r.server_metrics or {}).get("requests", 1) != 1 for r in foreign)


POLICY = """schema_version = 1
[rules.warm_prefill_change]
enabled = true
max_change_pct = 5.0
max_foreign_fraction = {fraction}
"""


def test_a_3x_slower_variant_fails_warm_prefill_change_with_a_stranger_on_the_base_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=40 + 4 * i) for i in range(12)])
    with (
        FakeServer(metrics_lag_s=LAG_S) as a,
        FakeServer(metrics_lag_s=LAG_S) as b,
        stranger_alongside(a, share=1 / 3) as hit,
    ):
        b.slowdown = 3.0
        ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=("cold", "warm", "timing"))
        cb = replace(ca, variant="slow", topology=endpoints(b.base_url))
        da, db = execute_ab(AbConfig(ca, cb, seed=3, quiet=True))
    base = [r for r in _records(da) if r.pass_name == "timing_warm" and r.server_metrics]
    landed = [r for r in base if r.cache_salt in hit]
    assert landed and all(r.server_foreign is not None for r in landed)  # the stranger in base warm windows
    # it ran inside about a third of the base run's requests, so the other base windows stay clean
    assert 0 < len(hit) < len(_records(da))
    assert len([r for r in base if r.server_foreign is None]) >= len(base) // 2
    loose = tmp_path / "loose.toml"
    loose.write_text(POLICY.format(fraction=1.0))
    capsys.readouterr()
    assert main(["gate", str(da), str(db), "--policy", str(loose)]) == 1
    out = capsys.readouterr().out
    assert "FAIL     warm_prefill_change" in out
    # the timing table counts them
    assert main(["compare", str(da), str(db), "--full", "--policy", str(loose)]) == 0
    assert "foreign: server figures not the request's own" in capsys.readouterr().out
    # with the limit below the measured share: no verdict for the timing rule, named
    strict = tmp_path / "strict.toml"
    strict.write_text(POLICY.format(fraction=0.0))
    assert main(["gate", str(da), str(db), "--policy", str(strict)]) == 2
    assert "max_foreign_fraction 0" in " ".join(capsys.readouterr().out.split())


# ---------------------------------------------------------------- usage vs the server's counters


def test_usage_overreporting_a_hit_the_server_recomputed_fails_cache_reports_consistent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(3)])
    with FakeServer() as a, FakeServer() as b:
        # the variant's warm request of ex1 misses the cache (recomputed) but its usage claims the full hit
        for kind in ("warm_miss", "overreport"):
            b.add_fault(Fault(kind, match="Example ex1:", salt_seen=1))
        ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=("cold", "warm", "repeat"))
        da = execute_run(ca)
        db = execute_run(replace(ca, variant="over", topology=endpoints(b.base_url)))
    warm, again = [r for r in _records(db) if r.example_id == "ex1" and r.pass_name == "warm"]
    n = warm.usage.prompt_tokens  # the fake's block size is 16: usage claims the prompt's full blocks
    assert n is not None
    claimed = (n - 1) // 16 * 16
    assert warm.usage.cached_tokens == claimed
    assert warm.cache_finding == f"usage reports {claimed} cached tokens, the server counted 0 hits"
    # usage says it hit; the cache check reads the server's count: a miss, retried like one (and then a hit)
    assert (
        warm.status == "invalid"
        and warm.error == f"expected {claimed} cached tokens (hit), the server reported 0"
    )
    assert again.status == "ok" and again.cache_finding is None
    assert sum(r.cache_finding is not None for r in _records(db)) == 1
    assert all(r.cache_finding is None for r in _records(da))
    capsys.readouterr()
    assert main(["gate", str(da), str(db)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "FAIL cache_reports_consistent: measured usage vs server hit count disagree: base 0, variant 1; "
        f"threshold <= 0 per run (first: variant qasper/ex1 warm: usage reports {claimed} cached tokens, the "
        "server counted 0 hits)"
    ) in out


def _failing_rules(out: str) -> set[str]:
    return {line.split()[1].rstrip(":") for line in out.splitlines() if line.split()[:1] == ["FAIL"]}


def test_usage_that_claims_a_hit_for_every_miss_fails_cache_reports_consistent_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine fault usage_overreport (docs/faults.md) on the fake: every response claims its prompt's full
    blocks cached, the server's counters say what it computed. Its cold and fresh-salt requests were misses as
    asked, so they stay valid (the cache checks read the server's count), no request is retried, and the gate
    FAILs cache_reports_consistent and nothing else (before: every cold record invalid and retried in vain,
    cache_isolation and cold/warm equality failing too)."""
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(3)])
    passes = ("cold", "warm", "repeat", "controls")
    with FakeServer() as a, FakeServer() as b:
        b.add_fault(Fault("overreport", times=-1))
        ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=passes)
        da = execute_run(ca)
        db = execute_run(replace(ca, variant="over", topology=endpoints(b.base_url)))
    records = _records(db)
    assert [r.status for r in records] == ["ok"] * 15  # 3 inputs x (cold, warm, repeat, 2 controls)
    misses = [r for r in records if r.pass_name in ("cold", "control_salt")]
    assert len(misses) == 6 and all(r.usage.cached_tokens and r.cache_finding for r in misses)
    capsys.readouterr()
    assert main(["gate", str(da), str(db)]) == 1
    assert _failing_rules(capsys.readouterr().out) == {"cache_reports_consistent"}
