"""`lbeval run` end to end against the fake server: records, verification, faults, resume, secrets."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main as cli_main
from eval.errors import ConfigError, LbevalError
from eval.records.final import select_final
from eval.records.run_folder import RECORDS_NAME, load_run, read_manifest
from eval.records.types import RequestRecord
from eval.run.config import endpoints
from eval.run.retry import RetryPolicy
from eval.run.runner import RunConfig, execute_run
from tests.eval.fake_fixtures import config_for, fake_fixture, make_row, write_rows  # noqa: F401 - fixture
from tests.support.fake_server import FakeServer, Fault

ROOT = Path(__file__).resolve().parents[3]
# make_row(i): "Example exI:" (2 words) + 60 words + "\n\n" (2) + "Question: what is exI?" (4) + "\n\n" (2) + "Answer:"
RAW_TOKENS = 2 + 60 + 2 + 4 + 2 + 1
CHAT_TOKENS = RAW_TOKENS + 3 + 5  # the fake's chat template adds 3 tokens before and 5 after
BLOCK = 16
WARM_HIT = (CHAT_TOKENS - 1) // BLOCK * BLOCK  # 64


def two_rows(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])


def run(server: FakeServer, tmp_path: Path, **kw: Any) -> Path:
    inputs = kw.pop("inputs", None) or two_rows(tmp_path)
    return execute_run(config_for(server, inputs, tmp_path / "runs", **kw))


def by_slot(records: list[RequestRecord]) -> dict[tuple[str, str, int], list[RequestRecord]]:
    out: dict[tuple[str, str, int], list[RequestRecord]] = {}
    for r in records:
        out.setdefault((r.example_id, r.pass_name, r.repetition), []).append(r)
    return out


def assert_complete_without_duplicates(run_dir: Path) -> list[RequestRecord]:
    loaded = load_run(run_dir)
    assert loaded.manifest.complete and loaded.manifest.ended_at is not None
    assert loaded.torn_lines == 0
    keys = [r.key for r in loaded.records]
    assert len(keys) == len(set(keys)), "a request was recorded twice"
    finals = select_final(loaded.records).final
    assert len(finals) == loaded.manifest.expected_records
    assert all(r.status in ("ok", "invalid") for r in finals.values())
    return loaded.records


def test_full_run_records_salts_and_verification(fake: FakeServer, tmp_path: Path) -> None:
    run_dir = run(fake, tmp_path)
    loaded = load_run(run_dir)
    m = loaded.manifest
    assert m.complete and m.expected_records == 2 * (5 + 2 * 2) and len(loaded.records) == 18
    assert m.model == fake.model and m.probe.block_size == BLOCK and m.warnings == []
    assert m.settings.passes == ["cold", "warm", "repeat", "timing", "controls"]
    assert [r.seq for r in loaded.records] == list(range(18))
    slots = by_slot(loaded.records)
    cold_salts = set()
    for ex in ("ex0", "ex1"):
        cold, warm, repeat = (slots[(ex, p, 0)][0] for p in ("cold", "warm", "repeat"))
        salt_ctl, sibling = slots[(ex, "control_salt", 0)][0], slots[(ex, "control_sibling", 0)][0]
        assert all(r.status == "ok" and r.usage.prompt_tokens == CHAT_TOKENS for r in (cold, warm, repeat))
        assert cold.usage.cached_tokens == 0 and cold.expected_cached_tokens == 0
        assert warm.usage.cached_tokens == WARM_HIT and warm.expected_cached_tokens == WARM_HIT
        assert repeat.usage.cached_tokens == WARM_HIT
        assert (
            cold.cache_salt and warm.cache_salt == cold.cache_salt == repeat.cache_salt == sibling.cache_salt
        )
        assert salt_ctl.cache_salt not in (None, cold.cache_salt) and salt_ctl.usage.cached_tokens == 0
        assert sibling.usage.cached_tokens and sibling.usage.cached_tokens > 0 and sibling.status == "ok"
        assert warm.output_token_ids == cold.output_token_ids and len(cold.output_token_ids or []) == 6
        assert cold.topk is not None and len(cold.topk.ids) == 6 and len(cold.topk.ids[0]) == 20
        assert cold.server_metrics is not None and cold.server_metrics["prefix_cache_hits"] == 0
        assert warm.server_metrics is not None and warm.server_metrics["prefix_cache_hits"] == WARM_HIT
        assert cold.settings["cache_salt"] == cold.cache_salt and "messages" not in cold.settings
        cold_salts.add(cold.cache_salt)
        for r in range(2):
            tc, tw = slots[(ex, "timing_cold", r)][0], slots[(ex, "timing_warm", r)][0]
            assert tc.cache_salt == tw.cache_salt and tc.cache_salt not in cold_salts
            cold_salts.add(tc.cache_salt)
            assert tc.usage.cached_tokens == 0 and tw.usage.cached_tokens == WARM_HIT
            assert tc.settings["max_tokens"] == 1 and tc.settings["stream"] is True
            assert tc.timings is not None and tc.timings.first_token_s is not None
            assert tc.server_metrics is not None and "prefill_time_s" in tc.server_metrics
    assert len(cold_salts) == 6  # every cold request had its own salt
    bodies = [body for _, body in fake.requests]
    assert all(b.get("return_tokens_as_token_ids") and "prompt_logprobs" not in b for b in bodies)
    # the chat inputs' requests; the only raw ones are the probe's cache-model check (4 token-ID requests, its own salts)
    chat = [b for b in bodies if "messages" in b]
    assert all(
        b["chat_template_kwargs"] == {"enable_thinking": False} and b["top_logprobs"] == 20 for b in chat
    )
    raw = [b for b in bodies if "messages" not in b]
    assert len(raw) == 4 and all(b["cache_salt"].startswith("lbeval-probe-") for b in raw)


def test_warm_miss_is_invalid_then_recovers(fake: FakeServer, tmp_path: Path) -> None:
    fake.add_fault(Fault("warm_miss", match="ex1", salt_seen=1))
    records = assert_complete_without_duplicates(run(fake, tmp_path))
    warm = by_slot(records)[("ex1", "warm", 0)]
    assert [(r.attempt, r.status) for r in warm] == [(0, "invalid"), (1, "ok")]
    assert warm[0].usage.cached_tokens == 0 and "expected 64 cached tokens" in str(warm[0].error)
    assert warm[1].usage.cached_tokens == WARM_HIT and warm[1].cache_salt == warm[0].cache_salt
    # the re-prime: the same prompt and salt with max_tokens=1 between the two attempts, not recorded
    same_salt = [b for _, b in fake.requests if b.get("cache_salt") == warm[0].cache_salt]
    assert [b["max_tokens"] for b in same_salt] == [
        6,
        6,
        1,
        6,
        6,
        1,
    ]  # cold, warm, re-prime, warm, repeat, sibling
    m = read_manifest(tmp_path / "runs" / "v1" / records[0].run_id)
    assert m.stats.invalid_attempts == {"warm": 1} and m.stats.counter("reprimes") == 1
    assert any("missed the prefix cache" in w for w in m.warnings)


def test_5xx_and_dropped_connections_are_retried_then_recorded(fake: FakeServer, tmp_path: Path) -> None:
    fake.add_fault(Fault("5xx", match="ex0", salt_seen=1, times=1))  # warm of ex0
    fake.add_fault(Fault("drop", match="ex1", salt_seen=0, stream=False))  # cold of ex1, mid-body
    fake.add_fault(
        Fault("drop", match="ex0", stream=True, after_chunks=1)
    )  # first timing request, mid-stream
    records = assert_complete_without_duplicates(run(fake, tmp_path))
    slots = by_slot(records)
    assert slots[("ex0", "warm", 0)][0].retries == 1 and slots[("ex0", "warm", 0)][0].status == "ok"
    assert slots[("ex1", "cold", 0)][0].retries == 1
    assert slots[("ex0", "timing_cold", 0)][0].retries == 1
    assert sum(r.retries for r in records) == 3


def test_persistent_failure_is_recorded_and_a_rerun_retries_it(fake: FakeServer, tmp_path: Path) -> None:
    fault = fake.add_fault(Fault("5xx", match="ex1", max_tokens=6, times=-1, message="engine dead"))
    run_dir = run(fake, tmp_path)
    loaded = load_run(run_dir)
    err = by_slot(loaded.records)[("ex1", "cold", 0)]
    assert [(r.status, r.retries) for r in err] == [("error", 2)] and "engine dead" in str(err[0].error)
    assert ("ex1", "warm", 0) not in by_slot(loaded.records)  # the group stopped at its cold
    assert not loaded.manifest.complete and loaded.manifest.ended_at is None
    assert any("failed after retries" in w for w in loaded.manifest.warnings)
    fault.times = 0
    records = assert_complete_without_duplicates(run(fake, tmp_path))
    cold = by_slot(records)[("ex1", "cold", 0)]
    assert [(r.group, r.status) for r in cold] == [(0, "error"), (1, "ok")]


@pytest.mark.parametrize("stop_after", [1, 4, 7])
def test_interrupt_then_resume_completes_without_duplicates(
    fake: FakeServer, tmp_path: Path, stop_after: int
) -> None:
    seen: list[RequestRecord] = []

    def interrupt(rec: RequestRecord) -> None:
        seen.append(rec)
        if len(seen) == stop_after:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute_run(config_for(fake, two_rows(tmp_path), tmp_path / "runs"), on_record=interrupt)
    run_dir = tmp_path / "runs" / "v1" / seen[0].run_id
    partial = load_run(run_dir)
    assert len(partial.records) == stop_after and not partial.manifest.complete
    assert partial.manifest.sessions[-1].outcome == "interrupted"
    records = assert_complete_without_duplicates(
        execute_run(config_for(fake, two_rows(tmp_path), tmp_path / "runs"))
    )
    assert len(records) == 18  # same server: the interrupted group was continued, nothing re-sent
    assert records[:stop_after] == partial.records


def test_resume_after_a_server_restart_starts_the_partial_group_over(
    fake: FakeServer, tmp_path: Path
) -> None:
    def interrupt_after_first(rec: RequestRecord) -> None:
        raise KeyboardInterrupt

    inputs = two_rows(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        execute_run(config_for(fake, inputs, tmp_path / "runs"), on_record=interrupt_after_first)
    fake.restart()  # the cache the interrupted group relied on is gone
    records = assert_complete_without_duplicates(execute_run(config_for(fake, inputs, tmp_path / "runs")))
    cold = by_slot(records)[("ex0", "cold", 0)]
    assert [r.group for r in cold] == [0, 1]
    assert all(r.group == 1 for r in records if r.example_id == "ex0" and r.pass_name in ("warm", "repeat"))
    assert all(r.status == "ok" for r in select_final(records).final.values())


def test_interrupt_at_concurrency_two_then_resume(fake: FakeServer, tmp_path: Path) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(4)])
    count = [0]

    def interrupt(rec: RequestRecord) -> None:
        count[0] += 1
        if count[0] == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute_run(config_for(fake, inputs, tmp_path / "runs", concurrency=2), on_record=interrupt)
    records = assert_complete_without_duplicates(
        execute_run(config_for(fake, inputs, tmp_path / "runs", concurrency=2))
    )
    assert len(select_final(records).final) == 4 * 9


def test_killed_process_then_resume(fake: FakeServer, tmp_path: Path) -> None:
    # the second input's requests are held by the server until the process is killed: it is killed mid-run
    # whatever the machine's load (no race between polling the records file and the run finishing)
    inputs = two_rows(tmp_path)
    held = threading.Event()
    fake.add_fault(Fault("slow", match="Example ex1:", times=-1, hold=held))
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "eval.cli", "run", "--variant", "v1", "--inputs", str(inputs)]
    cmd += ["--scenarios", "cache"]  # the cache-only plan this test resumes with config_for
    cmd += ["--base-url", fake.base_url, "--out", str(out), "--timing-reps", "2", "--stream-all", "--quiet"]
    cmd += ["--seed", "3", "--backoff", "0.01"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        records_file = wait_for_records(proc, out, 9)  # the first input's 9, then it waits on the second
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        held.set()
        fake.faults.clear()
    before = load_run(records_file.parent)
    assert not before.manifest.complete and len(select_final(before.records).final) == 9
    assert {r.example_id for r in before.records} == {"ex0"}  # killed while the second input was in flight
    config = replace(config_for(fake, inputs, out), stream_all=True)
    assert_complete_without_duplicates(execute_run(config))


def wait_for_records(proc: subprocess.Popen[bytes], out: Path, n: int) -> Path:
    """The records file once it holds n lines (the process is stopped by the test's hold, not by a clock)."""
    while True:
        records_file = next(iter(out.glob("v1/*/" + RECORDS_NAME)), None)
        if records_file is not None and records_file.read_bytes().count(b"\n") >= n:
            return records_file
        if proc.poll() is not None:
            raise AssertionError(f"lbeval run exited ({proc.returncode}) before writing {n} records")
        time.sleep(0.05)


def test_torn_last_line_is_reported_and_dropped(fake: FakeServer, tmp_path: Path) -> None:
    def interrupt_at_third(rec: RequestRecord) -> None:
        if rec.seq == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute_run(config_for(fake, two_rows(tmp_path), tmp_path / "runs"), on_record=interrupt_at_third)
    (run_dir,) = (tmp_path / "runs" / "v1").glob("run-*")
    whole = (run_dir / RECORDS_NAME).read_bytes()
    last = whole.rstrip(b"\n").rsplit(b"\n", 1)[1]
    (run_dir / RECORDS_NAME).write_bytes(whole + last[: len(last) // 2])  # a writer killed mid-line
    assert load_run(run_dir).torn_lines == 1
    records = assert_complete_without_duplicates(
        execute_run(config_for(fake, two_rows(tmp_path), tmp_path / "runs"))
    )
    assert len(records) == 18
    m = read_manifest(run_dir)
    assert m.sessions[-1].torn_lines_dropped == 1
    assert any("1 torn record line(s)" in w for w in m.warnings)


def test_changed_config_refuses_to_resume(fake: FakeServer, tmp_path: Path) -> None:
    inputs = two_rows(tmp_path)
    run_dir = execute_run(config_for(fake, inputs, tmp_path / "runs"))
    with pytest.raises(ConfigError, match=r"timing_reps 2 -> 3") as err:
        execute_run(config_for(fake, inputs, tmp_path / "runs", timing_reps=3))
    assert "--run-id" in str(err.value)
    other = write_rows(tmp_path / "other.jsonl", [make_row(0), make_row(2)])
    with pytest.raises(ConfigError, match="inputs_sha256"):
        execute_run(config_for(fake, other, tmp_path / "runs", run_id=run_dir.name))
    assert execute_run(config_for(fake, other, tmp_path / "runs")) != run_dir  # other inputs: another run
    assert load_run(run_dir).manifest.complete  # the refused attempts did not touch it


def test_api_key_appears_in_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-lbeval-SECRET-4f1c9e"
    monkeypatch.setenv("LBEVAL_TEST_KEY", secret)
    with FakeServer(api_key=secret) as server:
        with pytest.raises(LbevalError, match="401"):
            run(server, tmp_path / "nokey")
        run_dir = run(server, tmp_path, api_key_env="LBEVAL_TEST_KEY")
        assert load_run(run_dir).manifest.complete
    files = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert len(files) >= 3  # manifest, records, LATEST
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    with pytest.raises(ConfigError, match="LBEVAL_UNSET_KEY"):
        run(FakeServer(), tmp_path / "unset", api_key_env="LBEVAL_UNSET_KEY")


def test_4xx_stops_with_the_server_message(fake: FakeServer, tmp_path: Path) -> None:
    fake.add_fault(Fault("4xx", match="ex1", status=400, message="This model's maximum context length is 8"))
    with pytest.raises(
        LbevalError, match="qasper/ex1 cold: HTTP 400: This model's maximum context length is 8"
    ):
        run(fake, tmp_path)
    (run_dir,) = (tmp_path / "runs" / "v1").glob("run-*")
    loaded = load_run(run_dir)
    assert {r.example_id for r in loaded.records} == {"ex0"} and len(loaded.records) == 9
    assert (loaded.manifest.sessions[-1].outcome or "").startswith("stopped: ")
    assert not loaded.manifest.complete


def test_server_restart_reruns_the_group_from_cold(fake: FakeServer, tmp_path: Path) -> None:
    fake.add_fault(Fault("restart", match="ex0", salt_seen=1, max_tokens=6))  # just before ex0's warm
    records = assert_complete_without_duplicates(run(fake, tmp_path))
    ex0 = [r for r in records if r.example_id == "ex0" and not r.pass_name.startswith("timing")]
    assert [(r.pass_name, r.group, r.status) for r in ex0] == [
        ("cold", 0, "ok"),
        ("warm", 0, "invalid"),
        ("cold", 1, "ok"),
        ("warm", 1, "ok"),
        ("repeat", 1, "ok"),
        ("control_salt", 1, "ok"),
        ("control_sibling", 1, "ok"),
    ]
    assert "server restart detected" in str(ex0[1].error)
    assert ex0[2].cache_salt != ex0[0].cache_salt
    assert select_final(records).final[("qasper", "ex0", "warm", 0)].group == 1
    assert fake.restarts == 1
    m = read_manifest(tmp_path / "runs" / "v1" / records[0].run_id)
    assert m.stats.counter("group_restarts") == 1


def test_server_down_then_back_reruns_the_group(fake: FakeServer, tmp_path: Path) -> None:
    def take_down(rec: RequestRecord) -> None:
        if rec.example_id == "ex1" and rec.pass_name == "cold" and rec.group == 0:
            fake.restart(down_s=0.3, background=True)  # the port closes now, the server is back empty later

    retry = RetryPolicy(retries=6, backoff_s=0.1, max_backoff_s=0.4)
    config = config_for(fake, two_rows(tmp_path), tmp_path / "runs", retry=retry)
    records = assert_complete_without_duplicates(execute_run(config, on_record=take_down))
    warm = by_slot(records)[("ex1", "warm", 0)]
    assert [(r.group, r.status) for r in warm] == [(0, "invalid"), (1, "ok")]
    assert warm[0].retries >= 1


def test_metrics_recorded_after_a_lag(tmp_path: Path) -> None:
    # the server counts each request 0.15 s after answering it; the watch waits until it has (a condition), with
    # a bound far past any load (config_for's 0.5 s is a margin a loaded machine can overrun)
    with FakeServer(metrics_lag_s=0.15) as server:
        run_dir = run(server, tmp_path, passes=("cold", "warm"), metrics_wait_s=600.0)
        records = assert_complete_without_duplicates(run_dir)
    for r in records:
        assert r.server_metrics is not None and r.server_metrics["requests"] == 1.0
        assert "prefill_time_s" in r.server_metrics


def test_cold_reset_mode(fake: FakeServer, tmp_path: Path) -> None:
    records = assert_complete_without_duplicates(
        run(fake, tmp_path, cold_mode="reset", passes=("cold", "warm", "timing"))
    )
    cold = [r for r in records if r.pass_name in ("cold", "timing_cold")]
    assert all(r.cache_salt is None and r.usage.cached_tokens == 0 for r in cold)
    assert all(r.usage.cached_tokens == WARM_HIT for r in records if r.pass_name in ("warm", "timing_warm"))
    assert fake.reset_calls == 1 + len(cold)  # the probe's check, then one before each cold request


def test_prefix_caching_off_warns_and_does_not_invalidate(tmp_path: Path) -> None:
    with FakeServer(prefix_caching=False) as server:
        run_dir = run(server, tmp_path, passes=("cold", "warm", "repeat"))
    records = assert_complete_without_duplicates(run_dir)
    assert all(r.status == "ok" and r.usage.cached_tokens == 0 for r in records)
    assert any("prefix caching is off" in w for w in read_manifest(run_dir).warnings)


def test_concurrency_two(fake: FakeServer, tmp_path: Path) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(4)])
    run_dir = run(fake, tmp_path, inputs=inputs, concurrency=2)
    records = assert_complete_without_duplicates(run_dir)
    assert len(records) == 4 * 9 and all(r.server_metrics is None for r in records)
    assert sorted(r.seq for r in records) == list(range(36))
    assert any("timing figures are not valid" in w for w in read_manifest(run_dir).warnings)


def test_raw_mode_uses_completions(fake: FakeServer, tmp_path: Path) -> None:
    rows = [
        make_row(0, dataset="trec", mode="raw"),
        make_row(1, dataset="samsum", mode="raw", stop_token_ids=[198]),
    ]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    records = assert_complete_without_duplicates(run(fake, tmp_path, inputs=inputs, passes=("cold", "warm")))
    assert {r.endpoint for r in records} == {"completions"}
    assert all(r.usage.prompt_tokens == RAW_TOKENS for r in records)
    samsum = [b for p, b in fake.requests if "ex1" in b.get("prompt", "")]
    assert samsum and all(b["stop_token_ids"] == [198] and b["min_tokens"] == 1 for b in samsum)
    assert all("chat_template_kwargs" not in b for _, b in fake.requests if "prompt" in b)


def test_cli_prints_the_run_dir_last(
    fake: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = two_rows(tmp_path)
    args = [
        "run",
        "--variant",
        "cli",
        "--inputs",
        str(inputs),
        "--base-url",
        fake.base_url,
        "--out",
        str(tmp_path),
    ]
    args += ["--scenarios", "cache"]  # the cache-only plan this test counts
    assert cli_main([*args, "--passes", "cold,warm", "--quiet", "--max-tokens", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    run_dir = Path(out[-1])
    assert run_dir.parent == tmp_path / "cli" and (run_dir / "manifest.json").exists()
    assert (tmp_path / "cli" / "LATEST").read_text().strip() == run_dir.name
    assert all(r.settings["max_tokens"] == 2 for r in load_run(run_dir).records)
    bad = ["run", "--variant", "../x", "--inputs", str(inputs), "--base-url", fake.base_url, "--quiet"]
    assert cli_main(bad) == 78  # a ConfigError: printed as one line, exit code 78 (EX_CONFIG)


def test_variant_and_run_id_names_are_checked(fake: FakeServer, tmp_path: Path) -> None:
    for bad in ("../x", "a/b", ".hidden", ""):
        with pytest.raises(ConfigError, match="variant"):
            run(fake, tmp_path, variant=bad)
    with pytest.raises(ConfigError, match="run id"):
        run(fake, tmp_path, run_id="x/../../y")


def test_counts_by_pass_in_manifest(fake: FakeServer, tmp_path: Path) -> None:
    run_dir = run(fake, tmp_path, passes=("cold", "warm", "repeat"))
    stats = read_manifest(run_dir).stats
    assert stats.by_pass == {p: {"ok": 2, "invalid": 0, "error": 0} for p in ("cold", "warm", "repeat")}
    assert Counter(r.pass_name for r in load_run(run_dir).records) == {"cold": 2, "warm": 2, "repeat": 2}


def test_config_defaults_are_the_documented_ones() -> None:
    config = RunConfig(variant="v", inputs=Path("i"), topology=endpoints("http://x/v1"))
    assert config.passes == ("cold", "warm", "repeat", "timing", "controls")
    assert config.timing_reps == 5 and config.concurrency == 1 and config.cold_mode == "salt"
    assert config.request.top_logprobs == 20 and config.request.chat_template_kwargs == {
        "enable_thinking": False
    }
