"""`lbeval ab` on 2 replicas per side, killed (SIGKILL of the lbeval process) mid-run, then resumed with 1 and
with 3 replicas per side (eval/run/ab.py, eval/run/replicas.py).

The kill is event-driven: on each replica pair one input's B-side warm request is held by its fake server (a
`slow` fault waiting on an event) and the process is killed once both held requests have reached their servers,
so each lane has complete units behind it, one unit started on B and units not started ahead of it, whatever the
machine's load. After the resume: every unit complete before keeps its records, no slot has two final records
and no request was recorded twice, a unit started on a replica that the new layout moves it from restarts as a
whole on its new replica, no adjacent pair spans two replica indexes, every record names a replica of its
session, and both runs are complete."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from eval.cli import main
from eval.records.ab_pairs import read_pairs
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord
from eval.run.ab import session_order
from eval.run.replicas import assign_replicas, row_weight
from eval.run.steps import plan_units
from tests.eval.fake_fixtures import make_row, write_rows
from tests.support.fake_server import FakeServer, Fault

ROOT = Path(__file__).resolve().parents[3]
KILLED_N = 2  # replicas per side in the killed session
MOST = 3  # the fakes per side (the largest resumed layout)
SEED = 7
PASSES = ("cold", "warm", "timing")
ROWS = [make_row(i, words=40 + 10 * i) for i in range(8)]


@pytest.fixture(name="fakes")
def fakes_fixture() -> Iterator[list[FakeServer]]:
    """Side A's replicas are fakes[0:MOST], side B's fakes[MOST:2*MOST]."""
    with ExitStack() as stack:
        yield [stack.enter_context(FakeServer()) for _ in range(2 * MOST)]


def argv(fakes: list[FakeServer], inputs: Path, out: Path, n: int) -> list[str]:
    args = ["ab", "base", "var", "--inputs", str(inputs), "--out", str(out), "--passes", ",".join(PASSES)]
    args += ["--timing-reps", "2", "--scenarios", "cache", "--run-id", "r", "--seed", str(SEED), "--quiet"]
    args += ["--sampling-seed", "3", "--backoff", "0.01"]
    for k, side in enumerate("ab"):
        for fake in fakes[k * MOST : k * MOST + n]:
            args += [f"--base-url-{side}", fake.base_url]
    return args


def held_inputs() -> list[int]:
    """Per replica pair of the killed layout, the row whose B-side warm request is held: its lane's second
    input in session order (one input complete before it, at least one not started after it)."""
    assignment = assign_replicas([row_weight(r) for r in ROWS], KILLED_N)
    order = list(dict.fromkeys(u.row_index for u in session_order(plan_units(len(ROWS), PASSES, 2), SEED)))
    lanes = [[row for row in order if assignment[row] == i] for i in range(KILLED_N)]
    assert all(len(lane) >= 3 for lane in lanes)
    return [lane[1] for lane in lanes]


def marker(row: int) -> str:
    return f"Example ex{row}:"


def wait_until_held(proc: subprocess.Popen[bytes], fakes: list[FakeServer], rows: list[int]) -> None:
    """Until each held row's cold and warm requests have reached its B-side replica (the warm one is then held
    there: the process cannot move past it on that lane)."""

    def arrived(fake: FakeServer, row: int) -> bool:
        with fake.lock:
            return sum(marker(row) in str(body) for _, body in fake.requests) >= 2

    while not all(arrived(fakes[MOST + i], row) for i, row in enumerate(rows)):
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"lbeval ab exited ({proc.returncode}) before its held requests: {err}")
        time.sleep(0.05)


def killed_session(fakes: list[FakeServer], tmp_path: Path) -> tuple[Path, list[int]]:
    """The 2-replica session killed with one B-side warm request held on each replica pair."""
    inputs = write_rows(tmp_path / "inputs.jsonl", ROWS)
    rows = held_inputs()
    held = threading.Event()
    for i, row in enumerate(rows):  # body_pieces: a non-streamed answer is held too
        fakes[MOST + i].add_fault(
            Fault("slow", match=marker(row), salt_seen=1, times=-1, body_pieces=1, hold=held)
        )
    cmd = [sys.executable, "-m", "eval.cli", *argv(fakes, inputs, tmp_path / "runs", KILLED_N)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until_held(proc, fakes, rows)
        proc.kill()  # SIGKILL: no handler runs, the manifest is left as the kill found it
        proc.wait(timeout=60)
    finally:
        held.set()
        for fake in fakes:
            fake.faults.clear()
    return inputs, rows


def runs(out: Path) -> tuple[Path, Path]:
    return out / "base" / "r", out / "var" / "r"


def units_of(records: list[RequestRecord]) -> dict[tuple[str, str, str], list[RequestRecord]]:
    """(example, unit kind, repetition) -> its records: main (cold, warm) or one timing repetition."""
    out: dict[tuple[str, str, str], list[RequestRecord]] = {}
    for r in records:
        kind = "timing" if r.pass_name.startswith("timing") else "main"
        out.setdefault((r.example_id, kind, str(r.repetition if kind == "timing" else 0)), []).append(r)
    return out


def complete_units(records: list[RequestRecord]) -> dict[tuple[str, str, str], set[int]]:
    """The units whose every slot has an ok final record -> those records' send orders."""
    finals = select_final(records).final
    out: dict[tuple[str, str, str], set[int]] = {}
    for unit, recs in units_of(list(finals.values())).items():
        size = 2  # cold + warm, or timing_cold + timing_warm
        if len(recs) == size and all(r.status == "ok" for r in recs):
            out[unit] = {r.seq for r in recs}
    return out


@pytest.mark.parametrize("resumed_n", [1, 3])
def test_a_killed_replicated_ab_session_resumes_with_another_replica_count(
    fakes: list[FakeServer], tmp_path: Path, resumed_n: int
) -> None:
    inputs, rows = killed_session(fakes, tmp_path)
    out = tmp_path / "runs"
    before = {d: load_run(d) for d in runs(out)}
    for loaded in before.values():
        assert not loaded.manifest.complete  # killed: the session never ended
    a_before, b_before = (before[d].records for d in runs(out))
    for i, row in enumerate(rows):  # each held input: B's cold recorded on its replica, its warm never
        b_row = [r for r in b_before if r.example_id == f"ex{row}" and r.pass_name in ("cold", "warm")]
        assert [(r.pass_name, r.replica) for r in b_row] == [("cold", i)]
    done_before = {d: complete_units(before[d].records) for d in runs(out)}
    assert all(done_before.values())  # each side had complete units behind the held ones

    assert main(argv(fakes, inputs, out, resumed_n)) == 0
    new = assign_replicas([row_weight(r) for r in ROWS], resumed_n)
    for d in runs(out):
        loaded = load_run(d)
        assert loaded.manifest.complete and loaded.torn_lines == 0
        keys = [r.key for r in loaded.records]
        assert len(keys) == len(set(keys)), "a request recorded twice"
        sel = select_final(loaded.records)
        assert sum(sel.duplicates.values()) == 0 and len(sel.final) == loaded.manifest.expected_records
        assert all(r.status == "ok" for r in sel.final.values())
        assert all(0 <= r.replica < max(KILLED_N, resumed_n) for r in loaded.records)
        after = complete_units(loaded.records)
        for unit, seqs in done_before[d].items():  # nothing complete is lost: its very records still count
            assert after[unit] == seqs, unit
        for unit, recs in units_of(list(sel.final.values())).items():  # each unit's relations on one replica
            assert len({(r.replica, r.group) for r in recs}) == 1, unit
    _check_moved_units(runs(out)[1], rows, new)
    _check_pairs(runs(out))


def _check_moved_units(run_b: Path, rows: list[int], new: tuple[int, ...]) -> None:
    """A held input's main unit was started on B's replica i: on its new replica it restarted as a whole (a new
    group with its own cold), on its old one it resumed in place (the same group)."""
    recs = load_run(run_b).records
    final = select_final(recs).final
    for i, row in enumerate(rows):
        cold = next(r for r in final.values() if r.example_id == f"ex{row}" and r.pass_name == "cold")
        warm = next(r for r in final.values() if r.example_id == f"ex{row}" and r.pass_name == "warm")
        assert (cold.replica, cold.group) == (warm.replica, warm.group) and cold.replica == new[row]
        assert cold.group == (0 if new[row] == i else 1)


def _check_pairs(dirs: tuple[Path, Path]) -> None:
    """Every adjacent pair ran on one replica index on both sides; a half-done pair's rerun is not adjacent."""
    pairs = read_pairs(dirs[0])
    assert pairs == read_pairs(dirs[1])
    ra, rb = ({r.seq: r for r in load_run(d).records} for d in dirs)
    last = {(p.dataset, p.example_id, p.kind, p.repetition): p for p in pairs}
    assert all(p.complete for p in last.values())
    for p in pairs:
        if not p.a.ran or not p.b.ran:
            assert not p.adjacent and p.rerun is not None
            continue
        replicas = {ra[q].replica for q in p.a.seqs} | {rb[q].replica for q in p.b.seqs}
        assert len(replicas) == 1, p
