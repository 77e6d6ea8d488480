"""Foreign server figures on the real vLLM CPU server: a second client sends to the same
`cpu-smollm2` server while lbeval measures one-token timing on 4 mini inputs (2 repetitions: 16 timing
requests). Every other input is chosen as its first request after the probe is sent; before each request of a
chosen input is sent (lbeval's Client.send, after the scrape that opens its window), the second client sends one
uncached request and waits until the server has counted it, so it lands in that request's measured window
whatever the machine's load. Every figure a record keeps must be its own request's: its prefix-cache queries
equal its prompt tokens, its hits its cached tokens, one request finished and one observation per histogram;
every record of a chosen input is marked foreign, and the timing table leaves them out (and counts them).

Expected values come from the records' own usage (what the server answered for that request), never from the
deltas under test."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.score import score_run
from eval.prepare.inputs import sha256_text
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord
from eval.run.client import Client
from eval.run.metrics_text import FINISHED_COUNTER, parse_metrics
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import config_for
from tests.real_server.conftest import RealServer
from tests.real_server.mini import prepare_mini

pytestmark = pytest.mark.real_server

SPEC = "cpu-smollm2"
STRANGER_PROMPT = "Tell me about the weather in Lisbon in spring, in one long paragraph. " * 12


def _finished(client: Client) -> float:
    return parse_metrics(client.metrics_text()).counter(FINISHED_COUNTER) or 0.0


def _send_stranger(client: Client, model: str, salt: str) -> None:
    """One uncached request from a second client, returning once the server has counted it as finished (an
    event waited for; the deadline only guards against a server that never counts it)."""
    before = _finished(client)
    req = {"model": model, "prompt": STRANGER_PROMPT, "max_tokens": 1, "temperature": 0.0, "cache_salt": salt}
    ORIGINAL_SEND(client, "completions", req)
    deadline = time.monotonic() + 60
    while _finished(client) <= before:
        assert time.monotonic() < deadline, "the server never counted the second client's request"
        time.sleep(0.01)


ORIGINAL_SEND = Client.send


def test_a_second_client_on_the_server_leaves_no_foreign_figure_kept(
    real_server: RealServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = tmp_path / "inputs.jsonl"
    prepare_mini(inputs, n=2, base_url=real_server.base_url)
    decided: dict[str, bool] = {}  # input prompt sha256 -> chosen
    sent: list[str] = []
    armed: list[int] = []  # the seq of the first record: the probe is over (its requests stay clean)

    def send(self: Client, endpoint: str, request: dict[str, Any]) -> Any:
        text = request.get("prompt")
        if not isinstance(text, str):
            text = (request.get("messages") or [{}])[-1].get("content")
        key = sha256_text(text) if isinstance(text, str) and armed else ""
        # every other input, chosen as its first request after the probe is sent
        if key and decided.setdefault(key, len(decided) % 2 == 1):
            with Client(real_server.base_url) as other:
                _send_stranger(other, real_server.spec.model, f"stranger-{len(sent)}")
            sent.append(key)
        return ORIGINAL_SEND(self, endpoint, request)

    def arm(rec: RequestRecord) -> None:
        if not armed:
            armed.append(rec.seq)

    monkeypatch.setattr(Client, "send", send)
    config = config_for(
        real_server, inputs, tmp_path / "runs", variant=SPEC, passes=("timing",), timing_reps=2
    )
    run_dir = execute_run(replace(config, metrics_wait_s=5.0), on_record=arm)
    monkeypatch.setattr(Client, "send", ORIGINAL_SEND)
    run = load_run(run_dir)
    final = [r for r in select_final(run.records).final.values() if r.status == "ok" and r.server_metrics]
    assert len(final) == 16
    kept = [r for r in final if r.server_foreign is None]
    foreign = [r for r in final if r.server_foreign is not None]
    for r in kept:  # the expected values: the request's own usage, as the server answered it
        m = r.server_metrics or {}
        assert m.get("prefix_cache_queries") == r.usage.prompt_tokens, r
        assert m.get("prefix_cache_hits") == r.usage.cached_tokens, r
        assert m.get("finished") == 1 and m.get("requests") == 1, r
    chosen = {key for key, yes in decided.items() if yes}
    print(f"\nforeign {len(foreign)} of {len(final)} timing figures; the second client sent {len(sent)}")
    for r in foreign:
        print(f"  {r.pass_name} {r.example_id} r{r.repetition}: {r.server_foreign}")
    landed = [r for r in final if r.prompt_sha256 in chosen and r.seq > armed[0]]
    assert 0 < len(landed) < len(final)
    assert [r for r in landed if r.server_foreign is None] == [], "a window the second client ran in was kept"
    assert kept, "no window was clean: nothing kept to check"
    timing = score_run(run.run_dir).scores.timing  # the timing statistics count them and leave them out
    assert (timing.foreign, timing.with_figures) == (len(foreign), len(final))
