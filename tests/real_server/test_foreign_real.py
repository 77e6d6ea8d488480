"""Foreign server figures on the real vLLM CPU server (issue 19 item 0): a second client sends to the same
`cpu-smollm2` server while lbeval measures one-token timing on 4 mini inputs (2 repetitions: 16 timing
requests): after every other record, one uncached request that runs while lbeval sends its next one. Every figure a record keeps must be its own request's: its prefix-cache queries equal its prompt
tokens, its hits its cached tokens, one request finished and one observation per histogram; the rest is marked
foreign and left out of the timing table (which counts them).

Expected values come from the records' own usage (what the server answered for that request), never from the
deltas under test."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.score import score_run
from eval.cli import main
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord
from eval.run.client import Client
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import config_for
from tests.real_server.conftest import RealServer

pytestmark = pytest.mark.real_server

SPEC = "cpu-smollm2"
STRANGER_PROMPT = "Tell me about the weather in Lisbon in spring, in one long paragraph. " * 12


def _send_stranger(url: str, model: str, salt: str) -> None:
    with Client(url) as other:
        req = {
            "model": model,
            "prompt": STRANGER_PROMPT,
            "max_tokens": 1,
            "temperature": 0.0,
            "cache_salt": salt,
        }
        other.send("completions", req)


def test_a_second_client_on_the_server_leaves_no_foreign_figure_kept(
    real_server: RealServer, tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs.jsonl"
    prepare = ["prepare", "--source", "mini", "--datasets", "qasper,gov_report", "--n", "2",
               "--base-url", real_server.base_url, "--out", str(inputs)]  # fmt: skip
    assert main(prepare) == 0
    threads: list[threading.Thread] = []

    def interfere(rec: RequestRecord) -> None:
        """After every other record: the second client sends one request (uncached: a fresh salt; another
        length than any input), which runs while lbeval sends its next request."""
        if len(threads) % 2 == 0:
            args = (real_server.base_url, real_server.spec.model, f"stranger-{len(threads)}")
            thread = threading.Thread(target=_send_stranger, args=args, daemon=True)
            thread.start()
            threads.append(thread)
        else:
            threads.append(threading.Thread(target=lambda: None))

    config = config_for(
        real_server, inputs, tmp_path / "runs", variant=SPEC, passes=("timing",), timing_reps=2
    )
    run_dir = execute_run(replace(config, metrics_wait_s=5.0), on_record=interfere)
    for thread in threads:
        if thread.ident is not None:
            thread.join(timeout=60)
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
    print(
        f"\nforeign {len(foreign)} of {len(final)} timing figures; the second client sent {len(threads) // 2}"
    )
    for r in foreign:
        print(f"  {r.pass_name} {r.example_id} r{r.repetition}: {r.server_foreign}")
    assert kept, "no window was clean: nothing kept to check"
    assert foreign, "the second client never landed in a measured window: nothing was tested"
    timing = score_run(run.run_dir).scores.timing  # the timing statistics count them and leave them out
    assert (timing.foreign, timing.with_figures) == (len(foreign), len(final))
