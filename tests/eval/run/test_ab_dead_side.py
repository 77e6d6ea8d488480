"""`lbeval ab` with one side's server dead: mid-session, the session stops on both sides with one line naming the
side and that its engine died (the other side does not run on alone), and the resume says what happened; dead at
the probe, the session leaves no empty run folder behind."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eval.errors import LbevalError
from eval.records.ab_pairs import read_pairs
from eval.records.final import select_final
from eval.records.run_folder import RECORDS_NAME, read_manifest, scan_records
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer


def _config(tmp_path: Path, a: FakeServer, url_b: str) -> AbConfig:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(4)])
    ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=("cold", "warm", "timing"))
    return AbConfig(ca, replace(ca, variant="var", topology=endpoints(url_b)), seed=7)


def test_a_side_whose_engine_dies_stops_the_session_on_both_sides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []
    with FakeServer() as a, FakeServer() as b:
        config = _config(tmp_path, a, b.base_url)

        def kill_b(side: str, unit: tuple[int, str, int]) -> None:
            calls.append(side)
            if len(calls) == 3:  # after the second pair's first side: B dies
                b.stop()

        with pytest.raises(LbevalError) as caught:
            execute_ab(config, between=kill_b)
        sent_to_a = len(a.requests)
        message = str(caught.value)
        assert "\n" not in message
        assert (
            message.startswith("side B (var/ab-") and "its engine died" in message and b.base_url in message
        )
        run_a = next(p for p in (tmp_path / "runs" / "base").iterdir() if p.is_dir())
        run_b = next(p for p in (tmp_path / "runs" / "var").iterdir() if p.is_dir())
        for run_dir in (run_a, run_b):
            manifest = read_manifest(run_dir)
            assert not manifest.complete
            assert manifest.sessions[-1].outcome == f"stopped: {message}"
        # side A did not run on alone: at most the pair B died in, never the whole plan (it did before)
        final_a = select_final(scan_records(run_a / RECORDS_NAME).records).final
        assert len(final_a) < read_manifest(run_a).expected_records
        assert len(read_pairs(run_a)) <= 2
        capsys.readouterr()
        with FakeServer() as b2:  # B back (on another port): the resume says what stopped the last session
            da, db = execute_ab(replace(config, b=replace(config.b, topology=endpoints(b2.base_url))))
        assert len(a.requests) > sent_to_a
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "resuming" in line]
    assert said == [f"lbeval ab: resuming; the last session stopped: {message}"], err
    assert read_manifest(da).complete and read_manifest(db).complete


def test_a_side_dead_at_the_probe_leaves_no_empty_run_folders(tmp_path: Path) -> None:
    with FakeServer() as a:
        config = _config(tmp_path, a, "http://127.0.0.1:9/v1")  # nothing listens there
        with pytest.raises(LbevalError):
            execute_ab(config)
    assert not (tmp_path / "runs").exists(), sorted((tmp_path / "runs").rglob("*"))


def test_a_failed_resume_keeps_the_run_folders(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:
        config = _config(tmp_path, a, b.base_url)
        da, db = execute_ab(config)
    dead_b = replace(config.b, topology=endpoints("http://127.0.0.1:9/v1"))
    with FakeServer() as a2, pytest.raises(LbevalError):
        execute_ab(replace(config, a=replace(config.a, topology=endpoints(a2.base_url)), b=dead_b))
    assert read_manifest(da).complete and read_manifest(db).complete
