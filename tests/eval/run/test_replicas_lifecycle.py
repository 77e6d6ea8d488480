"""One place prepares, probes and starts a session over its topology (eval/run/lifecycle.py): `lbeval run` on one
server or replicas and `lbeval ab` on one endpoint or replicas per side all go through its three steps, read
from the source; and on fake replicas, an ab session's manifests say what the session was, and a side whose
replica differs from its replica 0 is refused with one line before either side's session is started."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from eval.errors import ConfigError
from eval.records.ab_pairs import read_pairs
from eval.records.run_folder import RECORDS_NAME, read_manifest, scan_records
from eval.redact import safe_url
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

ROOT = Path(__file__).resolve().parents[3]
N = 2
ROWS = [make_row(i, words=40 + 10 * i) for i in range(4)]
TIMING_REPS = 2
# the lifecycle's steps (eval/run/lifecycle.py) -> what only they call, each where it is defined
ONLY_FROM = {
    "prepare": "prepare_session",  # RunSession.prepare
    "probe_replicas": "probe_lanes",
    "replica_lanes": "start_session",
}


def _calls_by_function(rel: str) -> list[tuple[str, str, str]]:
    """(function, called name, the expression it is called on) for every call in a module's functions."""
    tree = ast.parse((ROOT / rel).read_text(), rel)
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                owner = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
                out.append((fn.name, name, owner))
    return out


def test_sessions_are_prepared_probed_and_started_only_through_the_lifecycle() -> None:
    starters: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "eval" / "run").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for fn, name, owner in _calls_by_function(rel):
            if name == "start" and "session" in owner:  # session.start(...): a session line written
                starters.add((rel, fn))
            if name == "prepare" and owner != "RunSession":
                continue
            if name in ONLY_FROM:
                assert (rel, fn) == ("eval/run/lifecycle.py", ONLY_FROM[name]), (rel, fn, name)
    # one server's start in the lifecycle's start step, the replicas' in replica_lanes (called only from there)
    assert starters == {("eval/run/lifecycle.py", "start_session"), ("eval/run/replicas.py", "replica_lanes")}
    for rel in ("eval/run/runner.py", "eval/run/ab.py"):  # both drivers use every step
        called = {name for _, name, _ in _calls_by_function(rel)}
        assert {"prepare_session", "probe_lanes", "start_session"} <= called, rel


@pytest.fixture(name="fakes")
def fakes_fixture() -> Iterator[list[FakeServer]]:
    with ExitStack() as stack:
        yield [stack.enter_context(FakeServer()) for _ in range(2 * N)]


def ab_config(fakes: list[FakeServer], tmp_path: Path) -> AbConfig:
    inputs = write_rows(tmp_path / "inputs.jsonl", ROWS)
    ca = config_for(
        fakes[0], inputs, tmp_path / "runs", variant="base", passes=("cold", "warm", "timing"),
        timing_reps=TIMING_REPS, run_id="r",
    )  # fmt: skip
    ca = replace(ca, topology=endpoints(*(f.base_url for f in fakes[:N])))
    cb = replace(ca, variant="var", topology=endpoints(*(f.base_url for f in fakes[N:])))
    return AbConfig(ca, cb, seed=5)


def test_an_ab_replica_sessions_manifests_say_what_ran(fakes: list[FakeServer], tmp_path: Path) -> None:
    config = ab_config(fakes, tmp_path)
    units = len(ROWS) * (1 + TIMING_REPS)  # per input: its main unit and each timing repetition
    records = len(ROWS) * (2 + 2 * TIMING_REPS)  # main: cold, warm; a timing repetition: its cold and warm
    for session in (1, 2):  # the second: a resume with nothing left
        dirs = execute_ab(config)
        for side, run_dir, own, partner in (
            ("a", dirs[0], fakes[:N], "var/r"),
            ("b", dirs[1], fakes[N:], "base/r"),
        ):
            m = read_manifest(run_dir)
            assert m.complete and m.expected_records == records and len(m.sessions) == session
            line = m.sessions[-1]
            assert line.outcome == "complete" and line.base_url == safe_url(own[0].base_url)
            assert (line.units_to_run, line.records_on_disk) == ((units, 0) if session == 1 else (0, records))
            assert line.records_written == (records if session == 1 else 0)
            assert [(e.replica, e.base_url) for e in line.replicas or []] == [
                (i, safe_url(f.base_url)) for i, f in enumerate(own)
            ]
            assert line.ab is not None and (line.ab.side, line.ab.seed, line.ab.partner) == (side, 5, partner)
            assert m.interleaved is not None and (m.interleaved.side, m.interleaved.pairs) == (side, units)
            assert len(scan_records(run_dir / RECORDS_NAME).records) == records
            assert len(read_pairs(run_dir)) == units
            assert not (run_dir / "servers.jsonl").exists()  # nothing started: the replicas were given


@pytest.mark.parametrize("side", ["a", "b"])
def test_a_side_whose_replica_differs_is_refused_before_either_side_starts(side: str, tmp_path: Path) -> None:
    odd = 1 if side == "a" else N + 1  # that side's replica 1
    with ExitStack() as stack:
        fakes = [stack.enter_context(FakeServer(block_size=32 if i == odd else 16)) for i in range(2 * N)]
        config = ab_config(fakes, tmp_path)
        with pytest.raises(
            ConfigError, match=r"replica 1 \(.*\) differs from replica 0 .*block_size 16 -> 32"
        ):
            execute_ab(config)
    assert not (tmp_path / "runs" / "base").exists() and not (tmp_path / "runs" / "var").exists()
