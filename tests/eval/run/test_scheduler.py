"""One scheduler (eval/run/scheduler.py) runs every unit of `lbeval run`, on one server (one lane) and on replicas
(a lane each): read from the source, nothing else in eval/run runs a unit or sends a session's units; a run on
one fake server and one on two fake replicas both go through `run_lanes`; and on one lane at --concurrency 2 the
first failure stops the lane's other units and is raised."""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from eval.errors import LbevalError
from eval.prepare.inputs import InputRow
from eval.records.run_folder import load_run
from eval.run import scheduler
from eval.run.config import endpoints
from eval.run.passes import Context, GroupState
from eval.run.runner import execute_run
from eval.run.session import Todo
from eval.run.steps import Unit
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

ROOT = Path(__file__).resolve().parents[3]
HANG_GUARD_S = 60.0  # only against a hang: the assertions never depend on how long anything took


def _called(rel: str, names: Sequence[str]) -> list[str]:
    """The calls in `rel` of any of `names` (by bare name or attribute)."""
    out = []
    for node in ast.walk(ast.parse((ROOT / rel).read_text(), rel)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in names:
                out.append(name)
    return out


def test_only_the_scheduler_runs_units_and_sends_a_sessions_units() -> None:
    units = ("run_unit", "run_scenario_unit")
    for path in sorted((ROOT / "eval" / "run").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        calls = _called(rel, units)
        if rel == "eval/run/scheduler.py":
            assert sorted(set(calls)) == sorted(units)
        else:
            assert calls == [], rel  # lbeval ab's pairs run each side's unit through scheduler.run_one
    # lbeval run's one lifecycle: runner.py sends through the scheduler once, for one server and for replicas
    assert _called("eval/run/runner.py", ("send",)) == ["send"]
    for rel in ("eval/run/runner.py", "eval/run/replicas.py"):
        assert _called(rel, ("run_to_end", "run_lanes", "run_at_once")) == [], rel


@pytest.fixture(name="fakes")
def fakes_fixture() -> Iterator[list[FakeServer]]:
    with ExitStack() as stack:
        yield [stack.enter_context(FakeServer()) for _ in range(2)]


def test_one_server_and_replicas_run_through_the_same_scheduler(
    fakes: list[FakeServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lanes_seen: list[int] = []
    real = scheduler.run_lanes

    def spy(
        todo: Sequence[Todo],
        rows: Sequence[InputRow],
        concurrency: int,
        ctxs: Sequence[Context],
        lane_of: object,
        cost: object,
    ) -> bool:
        lanes_seen.append(len(ctxs))
        return real(todo, rows, concurrency, ctxs, lane_of, cost)  # type: ignore[arg-type]

    monkeypatch.setattr(scheduler, "run_lanes", spy)
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(4)])
    one = config_for(fakes[0], inputs, tmp_path / "runs", variant="one", passes=("cold", "warm"))
    two = replace(one, variant="two", topology=endpoints(*(f.base_url for f in fakes)))
    dirs = [execute_run(one), execute_run(two)]
    assert lanes_seen == [1, 2]
    records = [load_run(d).records for d in dirs]
    assert all(load_run(d).manifest.complete for d in dirs)
    assert {r.replica for r in records[0]} == {0} and {r.replica for r in records[1]} == {0, 1}
    assert load_run(dirs[0]).manifest.sessions[-1].replicas is None  # one server: no replicas noted


def test_one_lane_at_concurrency_two_stops_at_the_first_failure_and_raises_it() -> None:
    """Unit 0 fails while unit 1 is in flight: unit 1 sees the lane's stop (as a real unit does at its next
    request), units 2-5 (not started) send nothing, and unit 0's failure is raised."""
    stop = threading.Event()
    ctx = cast(Context, type("Ctx", (), {"stop": stop})())
    started = {1: threading.Event()}
    sent: list[int] = []
    saw_stop: list[bool] = []

    def fake_run_one(ctx: Context, rows: object, todo: Todo, *_: object) -> bool:
        i = todo[0].row_index
        if ctx.stop.is_set():
            return False  # a unit checks the stop before each request
        sent.append(i)
        if i == 0:
            assert started[1].wait(HANG_GUARD_S)
            raise LbevalError("unit 0: HTTP 400")
        if i == 1:
            started[1].set()
            saw_stop.append(ctx.stop.wait(HANG_GUARD_S))
            return False
        return True

    todo: list[Todo] = [(Unit(i, "main", 0, ()), GroupState(group=0), 0) for i in range(6)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scheduler, "run_one", fake_run_one)
        with pytest.raises(LbevalError, match="unit 0: HTTP 400"):
            scheduler.run_lanes(todo, [], 2, [ctx], lambda _unit: 0)
    assert sorted(sent) == [0, 1] and saw_stop == [True] and stop.is_set()


def _fake_lanes(n: int) -> list[Context]:
    return [cast(Context, type("Ctx", (), {"stop": threading.Event()})()) for _ in range(n)]


def test_a_lane_busy_with_its_own_unit_leaves_the_shared_units_to_the_free_lane_costliest_first() -> None:
    """Lane 0's own unit does not return until every shared unit has run, so only lane 1 can run them: each
    exactly once, the costliest first (a scenario unit among the timing units at --concurrency 1)."""
    shared_units = [Unit(1, "timing", r, ()) for r in range(4)] + [Unit(2, "batch", 0, ())]
    costs = {
        (1, "timing", 0): 5,
        (1, "timing", 1): 9,
        (1, "timing", 2): 1,
        (1, "timing", 3): 9,
        (2, "batch", 0): 7,
    }
    all_done = threading.Event()
    ran: list[tuple[int, tuple[int, str, int]]] = []
    lock = threading.Lock()

    def fake_run_one(ctx: Context, rows: object, todo: Todo, *_: object) -> bool:
        unit = todo[0]
        key = (unit.row_index, unit.kind, unit.repetition)
        if key == (0, "main", 0):
            assert all_done.wait(HANG_GUARD_S), "the shared units waited for the busy lane"
        with lock:
            ran.append((lanes.index(ctx), key))
            if len(ran) == len(shared_units):
                all_done.set()
        return True

    todo: list[Todo] = [(Unit(0, "main", 0, ()), GroupState(group=0), 0)]
    todo += [(u, GroupState(group=0), 0) for u in shared_units]
    lanes = _fake_lanes(2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scheduler, "run_one", fake_run_one)
        ok = scheduler.run_lanes(
            todo, [], 1, lanes,
            lambda u: 0 if u.kind == "main" else None,
            lambda u: costs.get((u.row_index, u.kind, u.repetition), 0),
        )  # fmt: skip
    assert ok
    # by hand: costs 9, 9 (plan order: repetition 1 before 3), 7 (batch), 5, 1; then lane 0's own unit
    assert ran == [
        (1, (1, "timing", 1)), (1, (1, "timing", 3)), (1, (2, "batch", 0)), (1, (1, "timing", 0)),
        (1, (1, "timing", 2)), (0, (0, "main", 0)),
    ]  # fmt: skip


def test_above_concurrency_one_shared_scenario_units_wait_for_the_lanes_cache_units() -> None:
    """At --concurrency 2 a lane runs its cache units (its own, then the shared timing units) together, and the
    shared scenario unit only after them, alone."""
    order: list[str] = []
    lock = threading.Lock()

    def fake_run_one(ctx: Context, rows: object, todo: Todo, *_: object) -> bool:
        with lock:
            order.append(todo[0].kind)
        return True

    units = [
        Unit(0, "main", 0, ()),
        Unit(0, "batch", 0, ()),
        Unit(0, "timing", 0, ()),
        Unit(0, "timing", 1, ()),
    ]
    todo: list[Todo] = [(u, GroupState(group=0), 0) for u in units]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scheduler, "run_one", fake_run_one)
        assert scheduler.run_lanes(
            todo, [], 2, _fake_lanes(1),
            lambda u: 0 if u.kind == "main" else None,
            lambda u: 100 if u.kind == "batch" else 1,  # the costliest, still after the cache units
        )  # fmt: skip
    assert sorted(order[:3]) == ["main", "timing", "timing"] and order[3] == "batch"
