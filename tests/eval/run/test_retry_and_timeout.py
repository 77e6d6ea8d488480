"""`lbeval run` against a flaky or trickling fake server: the probe retries like every request, and
`--timeout` bounds each request as a whole (records name it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.errors import LbevalError
from eval.records.run_folder import load_run
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import FAST_RETRY, config_for, fake_fixture, make_row, write_rows  # noqa: F401
from tests.support.fake_server import FakeServer, Fault


def one_row(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "inputs.jsonl", [make_row(0)])


def test_503s_at_start_are_retried_by_the_probe(fake: FakeServer, tmp_path: Path) -> None:
    fault = fake.add_fault(
        Fault("5xx", times=FAST_RETRY.retries)
    )  # as many as --retries: the probe absorbs them
    run_dir = execute_run(config_for(fake, one_row(tmp_path), tmp_path / "runs", passes=("cold", "warm")))
    loaded = load_run(run_dir)
    assert fault.times == 0 and loaded.manifest.complete
    assert [r.status for r in loaded.records] == ["ok", "ok"]


def test_a_probe_failing_past_the_retries_ends_the_run_with_one_line(
    fake: FakeServer, tmp_path: Path
) -> None:
    fake.add_fault(Fault("5xx", times=-1))
    with pytest.raises(LbevalError, match=r"probe request probe-chat .* after 3 attempts .* HTTP 503") as err:
        execute_run(config_for(fake, one_row(tmp_path), tmp_path / "runs"))
    assert "\n" not in str(err.value)


def test_a_trickling_stream_is_an_error_record_after_the_retries(fake: FakeServer, tmp_path: Path) -> None:
    # timing_cold streams 4 chunks (role, 1 token, usage, [DONE]) 0.4 s apart: 1.6 s against --timeout 1
    fake.add_fault(Fault("slow", stream=True, times=-1, delay_s=0.4))
    config = config_for(
        fake, one_row(tmp_path), tmp_path / "runs", passes=("timing",), timing_reps=1, timeout_s=1
    )
    loaded = load_run(execute_run(config))
    assert [(r.pass_name, r.status) for r in loaded.records] == [("timing_cold", "error")]  # the unit stops
    rec = loaded.records[0]
    assert rec.error == "timed out after 1 s (whole request)" and rec.retries == FAST_RETRY.retries
    assert not loaded.manifest.complete
    # bounded by the attempts counted above (retries == FAST_RETRY.retries), not by a wall-clock margin
