"""`lbeval ab` with N replicas on each side (eval/run/ab.py): pairs of replica i of A and replica i of B, each
pair's two units adjacent in time on its replica pair, the N replica pairs at once, and the replicas scenario's
units paired on all replicas. Fake servers; concurrency is shown by a barrier the lanes must meet at (a lane run
after the other would never meet it), never by timing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import ConfigError
from eval.records.ab_pairs import PairRecord, read_pairs
from eval.records.final import unit_of
from eval.records.run_folder import RECORDS_NAME, read_manifest, scan_records
from eval.records.types import RequestRecord
from eval.run.ab import AbConfig, UnitId, execute_ab
from eval.run.config import endpoints
from eval.run.replicas import assign_replicas, row_weight
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

N = 2
ROWS = [make_row(i, words=40 + 10 * i) for i in range(6)]


@pytest.fixture(name="fakes")
def fakes_fixture() -> Iterator[list[FakeServer]]:
    with ExitStack() as stack:
        yield [stack.enter_context(FakeServer()) for _ in range(2 * N)]


def ab_config(fakes: list[FakeServer], tmp_path: Path, **kw: object) -> AbConfig:
    inputs = write_rows(tmp_path / "inputs.jsonl", ROWS)
    ca = config_for(
        fakes[0], inputs, tmp_path / "runs", variant="base", passes=("cold", "warm", "timing"), **kw
    )
    ca = replace(ca, topology=endpoints(*(f.base_url for f in fakes[:N])))
    cb = replace(ca, variant="var", topology=endpoints(*(f.base_url for f in fakes[N:])))
    return AbConfig(ca, cb, seed=7)


def records(run_dir: Path) -> dict[int, RequestRecord]:
    return {r.seq: r for r in scan_records(run_dir / RECORDS_NAME).records}


def pair_replicas(p: PairRecord, side: dict[int, RequestRecord], name: str) -> set[int]:
    return {side[s].replica for s in getattr(p, name).seqs}


def meeting_lanes() -> tuple[threading.Barrier, object]:
    """A `between` callback whose first call in each lane waits for the other lane's first call."""
    barrier = threading.Barrier(N, timeout=60)
    seen: set[int] = set()
    lock = threading.Lock()

    def between(side: str, uid: UnitId) -> None:
        with lock:
            first = threading.get_ident() not in seen
            seen.add(threading.get_ident())
        if first:
            barrier.wait()  # broken (an error) if the lanes do not run at once

    return barrier, between


def test_pairs_run_on_replica_i_of_both_sides_and_the_replica_pairs_at_once(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    barrier, between = meeting_lanes()
    da, db = execute_ab(ab_config(fakes, tmp_path), between=between)  # type: ignore[arg-type]
    assert not barrier.broken
    assert read_manifest(da).complete and read_manifest(db).complete
    pairs = read_pairs(da)
    assert pairs == read_pairs(db) and len(pairs) == len(ROWS) * 3  # main + 2 timing repetitions per input
    ra, rb = records(da), records(db)
    assignment = assign_replicas([row_weight(r) for r in ROWS], N)
    index = {r.id: i for i, r in enumerate(ROWS)}
    for (
        p
    ) in pairs:  # a main unit on its input's replica; a timing unit on one replica, the same on both sides
        on = pair_replicas(p, ra, "a")
        assert p.adjacent and len(on) == 1 and on == pair_replicas(p, rb, "b")
        assert p.kind != "main" or on == {assignment[index[p.example_id]]}
        first, second = (p.a, p.b) if p.order == "AB" else (p.b, p.a)
        assert first.end is not None and second.start is not None and second.start >= first.end
    # A's replica i and B's replica i ran the same units, the main units of replica i's inputs
    for i in range(N):
        assert {unit_of(r) for r in ra.values() if r.replica == i} == {
            unit_of(r) for r in rb.values() if r.replica == i
        }
        assert {r.example_id for r in ra.values() if r.replica == i and unit_of(r).kind == "main"} == {
            row.id for k, row in enumerate(ROWS) if assignment[k] == i
        }
        assert len(fakes[i].requests) > 0 and len(fakes[N + i].requests) > 0


def test_the_replicas_scenario_pairs_each_side_on_all_its_replicas(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    s = ScenarioSettings(scenarios=("cache", "replicas"), inputs=1, max_tokens=3)
    da, db = execute_ab(ab_config(fakes, tmp_path, scenarios=s))
    assert read_manifest(da).complete and read_manifest(db).complete
    spanning = [p for p in read_pairs(da) if p.kind == "replicas"]
    assert len(spanning) == 1 and spanning[0].adjacent
    ra, rb = records(da), records(db)
    for side, recs in (("a", ra), ("b", rb)):
        sent = [recs[q] for q in getattr(spanning[0], side).seqs]
        assert [(r.pass_name, r.replica) for r in sent] == [
            ("replicas_cold", 0), ("replicas_warm", 0), ("replicas_cold", 1), ("replicas_warm", 1)
        ]  # fmt: skip
        assert all(r.status == "ok" for r in sent)
    last_lane = max(q for p in read_pairs(da) if p.kind != "replicas" for q in (*p.a.seqs,))
    assert min(spanning[0].a.seqs) > last_lane  # after the replica pairs' own units


def test_sides_with_other_replica_counts_or_a_stop_check_are_refused(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    config = ab_config(fakes, tmp_path)
    with pytest.raises(ConfigError, match="same number of replicas"):
        execute_ab(replace(config, b=replace(config.b, topology=endpoints(config.b.base_url))))
    with pytest.raises(ConfigError, match="one endpoint per side"):
        execute_ab(replace(config, stop_check=lambda q: None))  # type: ignore[arg-type,return-value]


def test_the_command_takes_repeated_base_urls_per_side(fakes: list[FakeServer], tmp_path: Path) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", ROWS[:4])
    urls = [
        u
        for k, side in enumerate("ab")
        for f in fakes[k * N : (k + 1) * N]
        for u in (f"--base-url-{side}", f.base_url)
    ]
    code = main(
        ["ab", "base", "var", "--inputs", str(inputs), *urls, "--out", str(tmp_path / "runs"), "--passes", "cold,warm",
         "--scenarios", "cache", "--run-id", "r", "--quiet"]
    )  # fmt: skip
    assert code == 0
    for variant in ("base", "var"):
        m = read_manifest(tmp_path / "runs" / variant / "r")
        assert m.complete and [r.replica for r in m.sessions[-1].replicas or []] == list(range(N))
