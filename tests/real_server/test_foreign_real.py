"""Foreign server figures on the real vLLM CPU server (issue 19 item 0): a second client sends to the same
`cpu-smollm2` server while `lbeval run` measures one-token timing on 4 mini inputs (2 repetitions: 16 timing
requests). Every figure a record keeps must be its own request's: its prefix-cache queries equal its prompt
tokens, its hits its cached tokens, one request finished and one observation per histogram; the rest is marked
foreign and left out of the timing table (which counts them).

Expected values come from the records' own usage (what the server answered for that request), never from the
deltas under test."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from eval.analyze.score import score_run
from eval.cli import main
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.run.client import Client
from tests.real_server.conftest import RealServer

pytestmark = pytest.mark.real_server

SPEC = "cpu-smollm2"
STRANGER_PROMPT = "Tell me about the weather in Lisbon in spring, in one long paragraph. " * 12


def _stranger(url: str, model: str, stop: threading.Event, sent: list[int]) -> None:
    """Another client: a fresh-salted prompt (uncached, another length than any input), max_tokens 1, at
    seeded random gaps of 0.1-0.5 s."""
    rng = random.Random(5)
    with Client(url) as other:
        while not stop.is_set():
            salt = f"stranger-{len(sent)}"
            req = {
                "model": model,
                "prompt": STRANGER_PROMPT,
                "max_tokens": 1,
                "temperature": 0.0,
                "cache_salt": salt,
            }
            other.send("completions", req)
            sent.append(1)
            stop.wait(rng.uniform(0.1, 0.5))


def test_a_second_client_on_the_server_leaves_no_foreign_figure_kept(
    real_server: RealServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = tmp_path / "inputs.jsonl"
    prepare = ["prepare", "--source", "mini", "--datasets", "qasper,gov_report", "--n", "2",
               "--base-url", real_server.base_url, "--out", str(inputs)]  # fmt: skip
    assert main(prepare) == 0
    stop, sent = threading.Event(), list[int]()
    thread = threading.Thread(
        target=_stranger, args=(real_server.base_url, real_server.spec.model, stop, sent), daemon=True
    )
    thread.start()
    try:
        code = main(
            ["run", "--variant", SPEC, "--base-url", real_server.base_url, "--inputs", str(inputs),
             "--passes", "timing", "--timing-reps", "2", "--out", str(tmp_path / "runs"), "--run-id", "foreign",
             "--quiet"]
        )  # fmt: skip
    finally:
        stop.set()
        thread.join(timeout=30)
    assert code == 0 and len(sent) >= 3
    run = load_run(tmp_path / "runs" / SPEC / "foreign")
    final = [r for r in select_final(run.records).final.values() if r.status == "ok" and r.server_metrics]
    assert len(final) == 16
    kept = [r for r in final if r.server_foreign is None]
    foreign = [r for r in final if r.server_foreign is not None]
    for r in kept:
        m = r.server_metrics or {}
        assert m.get("prefix_cache_queries") == r.usage.prompt_tokens, r
        assert m.get("prefix_cache_hits") == r.usage.cached_tokens, r
        assert m.get("finished") == 1 and m.get("requests") == 1, r
    # every foreign one really moved by more than its request (or by another request's counts)
    for r in foreign:
        m = r.server_metrics or {}
        assert (m.get("finished"), m.get("requests"), m.get("prefix_cache_queries")) != (
            1,
            1,
            r.usage.prompt_tokens,
        ) or m.get("prefix_cache_hits") != r.usage.cached_tokens
    assert foreign, "the second client never landed in a measured window: nothing was tested"
    timing = score_run(run.run_dir).scores.timing  # the timing statistics count them and leave them out
    assert (timing.foreign, timing.with_figures) == (len(foreign), len(final))
    with capsys.disabled():
        print(f"\nforeign {len(foreign)} of {len(final)} timing figures; the second client sent {len(sent)}")
