"""Replicas (eval/run/replicas.py): the assignment, the placement, the probe's comparison, and runs on several fake
servers whose records show every unit's cache relations on one replica (a timing repetition's cold and warm
together, wherever it is placed), also after a resume with another replica count."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import eval.run.replicas as replicas_module
from eval.cli import main as cli_main
from eval.errors import ConfigError, LbevalError
from eval.prepare.inputs import sha256_text
from eval.records.final import select_final, unit_of
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord
from eval.records.vocabulary import SCENARIO_NAMES
from eval.run.config import endpoints, resolve_topology
from eval.run.ledger import SendLedger
from eval.run.probe import ProbeResult
from eval.run.replicas import (
    CPU_BIND_ENV,
    RankLedger,
    assign_replicas,
    core_sets,
    place_units,
    refuse_ranks_in_ab,
    replica_clients,
    replica_count,
    replica_differences,
    replica_specs,
    row_weight,
    unit_cost,
    where_units_began,
)
from eval.run.runner import RunConfig, execute_run
from eval.run.scenarios.base import scenario_step
from eval.run.scenarios.settings import ScenarioSettings
from eval.run.scheduler import LaneLock
from eval.run.steps import Step, Unit
from eval.serve.launch_specs import get_launch_spec, parse_spec
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault


@pytest.mark.parametrize(
    ("weights", "n", "expected"),
    [
        # heaviest first, each to the lightest replica so far (by hand: 10->0, 8->1, 1->1 (9), 1->1 (9 < 10))
        ([10, 1, 1, 8], 2, (0, 1, 1, 1)),
        # 7->0, 5->1, 4->1 (5 < 7: 9), 3->0 (7 < 9: 10), 1->1 (9 < 10: 10)
        ([7, 5, 4, 3, 1], 2, (0, 1, 1, 0, 1)),
        ([4, 9, 2], 1, (0, 0, 0)),
        ([6, 5, 4], 3, (0, 1, 2)),
        ([], 4, ()),
    ],
)
def test_assignment_balances_prompt_tokens(weights: list[int], n: int, expected: tuple[int, ...]) -> None:
    assert assign_replicas(weights, n) == expected


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_equal_weights_are_shared_evenly_and_the_same_seed_assigns_the_same(seed: int) -> None:
    got = assign_replicas([100] * 10, 4, seed)
    assert sorted(got.count(r) for r in range(4)) == [2, 2, 3, 3]
    assert assign_replicas([100] * 10, 4, seed) == got  # a resume with the same count: the same replicas


def test_assignment_refuses_no_replica() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        assign_replicas([1], 0)


def test_row_weight_is_prompt_tokens_else_a_character_estimate() -> None:
    assert row_weight(replace(make_row(0), prompt_tokens=321)) == 321
    row = replace(make_row(0), prompt_tokens=None, prompt="x" * 40)
    assert row_weight(row) == 10


@pytest.mark.parametrize(
    ("cores", "n", "expected"),
    [
        ([0, 1, 2, 3], 2, ["0-1", "2-3"]),
        ([0, 1, 2], 2, ["0-1", "2"]),
        ([0, 2, 5, 6], 2, ["0,2", "5-6"]),
        ([4, 5], 2, ["4", "5"]),
        ([0], 2, ["0", "0"]),
    ],
)
def test_core_sets_split_the_host(cores: list[int], n: int, expected: list[str]) -> None:
    assert core_sets(cores, n) == expected


def spec_raw(**kw: object) -> dict[str, object]:
    return {"command": ["serve"], "args": ["--port", "{port}"], **kw}


def test_a_launch_spec_with_replicas_binds_each_to_its_cores() -> None:
    spec = parse_spec("x2", spec_raw(replicas=2, env={"A": "1"}), "t.toml", {})
    assert spec.replicas == 2
    envs = [s.env for s in replica_specs(spec, [0, 1])]
    assert envs == [{"A": "1", CPU_BIND_ENV: "0"}, {"A": "1", CPU_BIND_ENV: "1"}]
    own = parse_spec("x2", spec_raw(replicas=2, env={CPU_BIND_ENV: "0-1"}), "t.toml", {})
    assert [s.env[CPU_BIND_ENV] for s in replica_specs(own, [0, 1])] == ["0-1", "0-1"]  # the spec's own wins


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (spec_raw(replicas=0), "replicas: expected a whole number of servers 1-64, got 0"),
        (spec_raw(replicas="2"), "replicas: expected a whole number"),
        ({"url": "http://h:1/v1", "replicas": 2}, "cannot be combined with replicas"),
    ],
)
def test_bad_replicas_in_a_launch_spec_are_refused(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_spec("x", raw, "t.toml", {})


def test_replica_differences_name_each_field() -> None:
    a = ProbeResult(model="m", model_ids=["m"], version="0.32.0", block_size=16)
    assert replica_differences(a, replace(a)) == []
    b = replace(a, block_size=128, version="0.31.0")
    assert replica_differences(a, b) == ["version '0.32.0' -> '0.31.0'", "block_size 16 -> 128"]


def test_ab_takes_endpoints_as_replicas_but_refuses_a_routing_endpoints_ranks(tmp_path: Path) -> None:
    config = RunConfig(variant="v", inputs=tmp_path / "i.jsonl", topology=endpoints("http://a/v1"))
    refuse_ranks_in_ab(config, "v")  # one endpoint: fine
    two = endpoints("http://a/v1", "http://b/v1")
    refuse_ranks_in_ab(replace(config, topology=two), "v")  # two replicas: paired
    with pytest.raises(ConfigError, match="side v is a routing endpoint with 2 ranks"):
        refuse_ranks_in_ab(replace(config, topology=endpoints("http://a/v1", dp_ranks=2)), "v")


# --- runs on fake replicas ---------------------------------------------------------------------------------------


@pytest.fixture(name="fakes")
def fakes_fixture() -> Iterator[list[FakeServer]]:
    with ExitStack() as stack:
        yield [stack.enter_context(FakeServer()) for _ in range(3)]


def six_rows(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=40 + 10 * i) for i in range(6)])


def replicated(servers: list[FakeServer], inputs: Path, out: Path) -> RunConfig:
    config = config_for(servers[0], inputs, out)
    return replace(config, topology=endpoints(*(s.base_url for s in servers)))


def relations_on_one_replica(records: list[RequestRecord]) -> dict[tuple[object, int], set[int]]:
    """Each unit's group (cold, warm, repeat, controls; one timing repetition) -> the replicas its records name."""
    out: dict[tuple[object, int], set[int]] = {}
    for r in records:
        out.setdefault((unit_of(r), r.group), set()).add(r.replica)
    return out


def test_every_unit_runs_on_one_replica_and_the_manifest_lists_them(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    fakes[1].base_url  # noqa: B018 - three distinct servers
    run_dir = execute_run(replicated(fakes, six_rows(tmp_path), tmp_path / "runs"))
    loaded = load_run(run_dir)
    assert loaded.manifest.complete
    finals = select_final(loaded.records).final
    assert len(finals) == loaded.manifest.expected_records
    assert all(r.status == "ok" for r in finals.values())  # every warm hit: its cold was on its replica
    groups = relations_on_one_replica(loaded.records)
    assert all(len(replicas) == 1 for replicas in groups.values())
    main_of: dict[str, set[int]] = {}
    for r in loaded.records:
        if unit_of(r).kind == "main":
            main_of.setdefault(r.example_id, set()).add(r.replica)
    assert all(len(s) == 1 for s in main_of.values())  # an input's main unit on one replica
    assert {next(iter(s)) for s in main_of.values()} == {0, 1, 2}  # all three used
    timing_pairs: dict[tuple[str, int], set[int]] = {}
    for r in finals.values():
        if r.pass_name in ("timing_cold", "timing_warm"):
            timing_pairs.setdefault((r.example_id, r.repetition), set()).add(r.replica)
    assert len(timing_pairs) == 6 * 2 and all(
        len(s) == 1 for s in timing_pairs.values()
    )  # cold, warm together
    away = [(ex, rep) for (ex, rep), (replica,) in timing_pairs.items() if main_of[ex] != {replica}]
    assert away  # a timing repetition placed by cost, away from its input's main unit
    for index, fake in enumerate(fakes):  # each server saw exactly its inputs' requests
        ids = {r.example_id for r in loaded.records if r.replica == index}
        sent = {body["messages"][0]["content"].split(":")[0].split()[-1] for body in not_probes(fake)}
        assert ids and all(any(i in s for s in sent) for i in ids)
    seqs = [r.seq for r in loaded.records]
    assert len(seqs) == len(set(seqs))  # one send order across the replicas
    line = loaded.manifest.sessions[-1].replicas or []
    assert [(e.replica, e.base_url) for e in line] == [(i, f.base_url) for i, f in enumerate(fakes)]


def not_probes(fake: FakeServer) -> list[dict[str, Any]]:
    """The generation requests a fake saw, but the probe's (their salts start with lbeval-probe-)."""
    return [b for _, b in fake.requests if not str(b.get("cache_salt") or "").startswith("lbeval-probe-")]


def test_a_resume_with_the_same_replicas_sends_nothing_more(fakes: list[FakeServer], tmp_path: Path) -> None:
    config = replicated(fakes, six_rows(tmp_path), tmp_path / "runs")
    run_dir = execute_run(config)
    before = len(load_run(run_dir).records)
    sent = sum(len(not_probes(f)) for f in fakes)
    execute_run(config)
    assert len(load_run(run_dir).records) == before
    assert sum(len(not_probes(f)) for f in fakes) == sent  # the probes' own requests only


def test_a_replica_that_differs_is_refused_with_the_difference(tmp_path: Path) -> None:
    with (
        FakeServer() as a,
        FakeServer(block_size=32) as b,
        pytest.raises(ConfigError, match=r"replica 1 \(.*\) differs from replica 0 .*block_size 16 -> 32"),
    ):
        execute_run(replicated([a, b], six_rows(tmp_path), tmp_path / "runs"))


def test_a_unit_left_on_a_gone_replica_restarts_whole_on_its_new_one(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    inputs = six_rows(tmp_path)
    fakes[2].add_fault(
        Fault(kind="4xx", status=400, match="Question:", salt_seen=1)
    )  # replica 2: a cold answered, its warm refused
    with pytest.raises(LbevalError):  # a 4xx stops the session on every replica
        execute_run(replicated(fakes, inputs, tmp_path / "runs"))
    left = load_run(next((tmp_path / "runs" / "v1").glob("run-*")))
    assert not left.manifest.complete
    colds = {"cold": "warm", "timing_cold": "timing_warm"}  # a unit's cold pass -> its warm twin
    stranded = {
        (unit_of(r), r.pass_name)
        for r in left.records
        if r.replica == 2 and r.pass_name in colds and r.status == "ok"
    }
    assert stranded  # a unit (main or a timing repetition) with its cold on replica 2 and no warm
    run_dir = execute_run(replicated(fakes[:2], inputs, tmp_path / "runs"))  # two replicas now
    loaded = load_run(run_dir)
    assert loaded.manifest.complete
    assert all(len(replicas) == 1 for replicas in relations_on_one_replica(loaded.records).values())
    finals = select_final(loaded.records).final
    for slot, rec in finals.items():
        assert rec.replica in (0, 1), slot  # nothing final from the gone replica
    for unit, cold_pass in stranded:  # restarted as a whole: a new group, its cold on the new replica
        mine = [r for r in finals.values() if unit_of(r) == unit]
        cold = next(r for r in mine if r.pass_name == cold_pass)
        warm = next(r for r in mine if r.pass_name == colds[cold_pass])
        assert cold.group >= 1 and (cold.replica, cold.group) == (warm.replica, warm.group)


def test_the_shipped_two_replica_spec_is_cpu_smollm2_twice_on_its_own_cores() -> None:
    base = get_launch_spec("cpu-smollm2", environ={"LBEVAL_CACHE": "/c"})
    spec = get_launch_spec("cpu-smollm2-x2", environ={"LBEVAL_CACHE": "/c"})
    assert (spec.replicas, spec.args, spec.model) == (2, base.args, base.model)
    assert [s.env[CPU_BIND_ENV] for s in replica_specs(spec, [0, 1])] == ["0", "1"]
    assert replica_count(RunConfig(variant="v", inputs=Path("i"), topology=resolve_topology((), spec))) == 2


def test_scenario_units_with_their_primes_and_fillers_stay_on_one_replica_placed_by_cost(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    s = ScenarioSettings(scenarios=SCENARIO_NAMES, batch_sizes=(1, 2), inputs=4, max_tokens=3)
    config = replace(replicated(fakes[:2], six_rows(tmp_path), tmp_path / "runs"), scenarios=s)
    loaded = load_run(execute_run(replace(config, passes=("cold", "warm"))))
    assert loaded.manifest.complete
    scenarios = {r.scenario for r in loaded.records}
    assert scenarios == set(SCENARIO_NAMES)
    by_unit: dict[tuple[object, int], set[int]] = {}
    cache_of_input: dict[str, set[int]] = {}
    for r in loaded.records:
        if (
            r.scenario != "replicas"
        ):  # the replicas scenario sends to every replica (test_replicas_scenario.py)
            by_unit.setdefault((unit_of(r), r.group), set()).add(r.replica)
        if r.scenario == "cache":
            cache_of_input.setdefault(r.example_id, set()).add(r.replica)
    assert all(len(replicas) == 1 for replicas in by_unit.values())  # a unit with its primes and fillers
    assert all(len(replicas) == 1 for replicas in cache_of_input.values())  # an input's cache units together
    assert {next(iter(s)) for s in cache_of_input.values()} == {0, 1}
    moved = {
        (key.kind, key.example_id)
        for (key, _), (replica,) in by_unit.items()
        if key.kind != "main" and cache_of_input[key.example_id] != {replica}
    }
    assert moved  # a scenario unit placed by cost, away from its input's cache units
    for index, fake in enumerate(fakes[:2]):  # each cache record's prompt went to the replica it names
        seen = {sha256_text(prompt_of(body)) for _, body in fake.requests}
        mine = {r.prompt_sha256 for r in loaded.records if r.replica == index and r.scenario == "cache"}
        assert mine and mine <= seen


def test_a_replicas_turn_goes_to_units_in_the_order_they_asked() -> None:
    turn = LaneLock()
    order: list[str] = []

    def ask(name: str) -> None:
        with turn:
            order.append(name)

    turn.acquire()  # a unit sending on the replica
    threads = []
    for name in ("spanning unit", "the lane's next unit", "another spanning unit"):
        threads.append(threading.Thread(target=ask, args=(name,)))
        threads[-1].start()
        while turn._asked < len(threads) + 1:  # until this one has asked for its turn
            time.sleep(0.001)
    turn.release()
    for t in threads:
        t.join()
    assert order == ["spanning unit", "the lane's next unit", "another spanning unit"]


def test_units_are_placed_by_cost_after_their_inputs_cache_units() -> None:
    rows = [replace(make_row(0), prompt_tokens=30), replace(make_row(1), prompt_tokens=10)]
    main = (Step("cold", salt="fresh", expect="miss"), Step("warm"))
    step = lambda name, **kw: scenario_step(name, 0, "miss", {}, **kw)  # noqa: E731
    batch = Unit(0, "batch", 0, (step("batch"), step("batch"), step("batch")))  # 3 x 30
    repeats = Unit(0, "repeats", 0, (step("repeats"), step("traffic_noise", prompt_row=1)))  # 30 + 10
    traffic = Unit(1, "traffic", 0, (step("traffic_cold"),))  # 10
    spanning = Unit(0, "replicas", 0, (step("replicas_cold", replica=0), step("replicas_cold", replica=1)))
    units = [Unit(0, "main", 0, main), Unit(1, "main", 0, main), batch, repeats, traffic, spanning]
    # by hand, a request's cost = its prompt (an eighth of it on a hit, at least 1) + 30 x its output limit
    # (make_row's 6 -> 180): main 0 = (30 + 180) + (3 + 180) = 393, main 1 = (10 + 180) + (1 + 180) = 371; batch
    # 3 x 210 = 630 (no batch groups here), repeats 210 + 190 = 400, traffic 190. The inputs heaviest first (30 -> 0,
    # 10 -> 1); then the costliest scenario unit first, each to the lighter lane: batch -> 1 (1001), repeats -> 0
    # (793), traffic -> 0 (983)
    assert [unit_cost(u, rows) for u in units[:5]] == [393, 371, 630, 400, 190]
    assert place_units(units, rows, 2) == {
        (0, "main", 0): 0, (1, "main", 0): 1, (0, "batch", 0): 1, (0, "repeats", 0): 0, (1, "traffic", 0): 0,
    }  # fmt: skip
    assert set(place_units(units, rows, 1).values()) == {0}


def test_timing_repetitions_are_placed_by_cost_each_with_its_cold_and_warm() -> None:
    rows = [replace(make_row(0), prompt_tokens=30), replace(make_row(1), prompt_tokens=10)]
    main = (Step("cold", salt="fresh", expect="miss"), Step("warm"))

    def timing(r: int) -> tuple[Step, ...]:
        return (
            Step("timing_cold", r, salt="fresh", expect="miss", max_tokens=1),
            Step("timing_warm", r, expect="hit", max_tokens=1),
        )

    units = [Unit(0, "main", 0, main), Unit(1, "main", 0, main)]
    units += [Unit(i, "timing", r, timing(r)) for i in (0, 1) for r in (0, 1)]
    # by hand: main loads 393 and 371 (as in the test above); a timing unit (output limit 1) costs (30 + 30) +
    # (3 + 30) = 93 on input 0 and (10 + 30) + (1 + 30) = 71 on input 1; costliest first (plan order among equal
    # costs), each to the lighter lane: (0, 0) -> 1 (464), (0, 1) -> 0 (486), (1, 0) -> 1 (535), (1, 1) -> 0 (557)
    assert [unit_cost(u, rows) for u in units[2:]] == [93, 93, 71, 71]
    assert place_units(units, rows, 2) == {
        (0, "main", 0): 0, (1, "main", 0): 1,
        (0, "timing", 0): 1, (0, "timing", 1): 0, (1, "timing", 0): 1, (1, "timing", 1): 0,
    }  # fmt: skip
    assert set(place_units(units, rows, 1).values()) == {0}


def test_a_batch_costs_its_prefills_and_its_longest_decoding_and_short_requests_weigh_their_count() -> None:
    rows = [replace(make_row(0), prompt_tokens=400), replace(make_row(1), prompt_tokens=16)]
    step = lambda name, **kw: scenario_step(name, 0, "miss", {}, **kw)  # noqa: E731
    # a batch of 3 sent at once (batch 0): 3 prefills of 400, one decoding of 30 x 6 = 180 -> 1380; the same three
    # sent one by one: 3 x (400 + 180) = 1740
    batched = Unit(0, "batch", 0, tuple(step("batch_member", batch=0) for _ in range(3)))
    alone = Unit(0, "batch", 0, tuple(step("batch_alone") for _ in range(3)))
    assert (unit_cost(batched, rows), unit_cost(alone, rows)) == (1380, 1740)
    # ten short requests of 2 output tokens (16 + 60 each = 760) outweigh one long one of 400 + 180 = 580,
    # though their prompts hold 160 tokens against 400
    short = Unit(1, "hitlen", 0, tuple(step("hitlen_primed", max_tokens=2) for _ in range(10)))
    long = Unit(0, "repeats", 0, (step("repeats"),))
    assert (unit_cost(short, rows), unit_cost(long, rows)) == (760, 580)


def prompt_of(body: dict[str, object]) -> str:
    messages = body.get("messages")
    if isinstance(messages, list):
        return str(messages[0]["content"])
    return str(body.get("prompt"))


def test_the_command_line_takes_base_url_repeated(fakes: list[FakeServer], tmp_path: Path) -> None:
    inputs = six_rows(tmp_path)
    argv = ["run", "--variant", "v", "--inputs", str(inputs), "--out", str(tmp_path / "runs"), "--quiet"]
    argv += ["--passes", "cold,warm"]
    for fake in fakes[:2]:
        argv += ["--base-url", fake.base_url]
    assert cli_main(argv) == 0
    loaded = load_run(next((tmp_path / "runs" / "v").glob("run-*")))
    assert {r.replica for r in loaded.records} == {0, 1}
    assert len(loaded.manifest.sessions[-1].replicas or []) == 2


def test_an_interrupted_replicated_run_is_recorded_and_resumes_on_the_same_replicas(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    config = replicated(fakes, six_rows(tmp_path), tmp_path / "runs")
    seen: list[RequestRecord] = []

    def stop_after_five(rec: RequestRecord) -> None:
        seen.append(rec)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute_run(config, on_record=stop_after_five)
    run_dir = next((tmp_path / "runs" / "v1").glob("run-*"))
    left = load_run(run_dir)
    assert not left.manifest.complete and left.manifest.sessions[-1].outcome == "interrupted"
    assert 5 <= len(left.records) < left.manifest.expected_records
    loaded = load_run(execute_run(config))
    assert loaded.manifest.complete
    assert all(len(replicas) == 1 for replicas in relations_on_one_replica(loaded.records).values())
    keys = [r.key for r in loaded.records]
    assert len(keys) == len(set(keys))  # nothing sent twice


def test_a_movable_unit_begun_on_a_replica_resumes_there(fakes: list[FakeServer], tmp_path: Path) -> None:
    """Interrupted right after a timing repetition's cold: that unit is resumed on the replica its records name
    (lbeval run sends a fresh movable unit to whichever replica is free first, so `place_units` need not have
    put it there), an input's main unit is left to its placement, and a replica no longer there places nothing."""
    config = replicated(fakes, six_rows(tmp_path), tmp_path / "runs")
    rows = [make_row(i, words=40 + 10 * i) for i in range(6)]

    def stop_at_a_timing_cold(rec: RequestRecord) -> None:
        if rec.pass_name == "timing_cold":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute_run(config, on_record=stop_at_a_timing_cold)
    run_dir = next((tmp_path / "runs" / "v1").glob("run-*"))
    records = load_run(run_dir).records
    cold = next(r for r in records if r.pass_name == "timing_cold")
    row = next(i for i, r in enumerate(rows) if r.id == cold.example_id)
    timing, main = Unit(row, "timing", cold.repetition, ()), Unit(row, "main", 0, ())
    key = (row, "timing", cold.repetition)
    assert where_units_began([timing, main], rows, records, len(fakes)) == {key: cold.replica}
    assert where_units_began([timing], rows, records, cold.replica) == {}  # its replica is gone
    placed = replicas_module.place_units

    def elsewhere(*args: Any, **kw: Any) -> dict[tuple[int, str, int], int]:
        lanes = placed(*args, **kw)
        # the placement would put the unit on another replica (of the three: the first timing cold may be on any)
        return {**lanes, key: (cold.replica + 1) % len(fakes)}

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(replicas_module, "place_units", elsewhere)
        resumed = load_run(execute_run(config)).records
    mine = [r for r in resumed if unit_of(r) == unit_of(cold)]
    assert {(r.group, r.replica) for r in mine} == {(cold.group, cold.replica)}  # carried on, not restarted
    assert sorted(r.pass_name for r in mine) == ["timing_cold", "timing_warm"]


def test_lbeval_run_gives_each_replica_its_own_send_ledger_and_ab_shares_one(tmp_path: Path) -> None:
    urls = ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1", "http://127.0.0.1:11/v1"]
    config = RunConfig(variant="v", inputs=tmp_path / "i.jsonl", topology=endpoints(*urls))
    shared = SendLedger()
    run = replica_clients(config, urls, shared, own=True)  # lbeval run: distinct servers
    ab = replica_clients(config, urls, shared)  # lbeval ab: its two sides may be one server
    routing = replace(config, topology=endpoints(urls[0], dp_ranks=2))
    ranks = replica_clients(routing, routing.topology.lane_urls, shared, own=True)
    for client in (*run, *ab, *ranks):
        client.close()
    assert run[0].ledger is shared and len({id(c.ledger) for c in run}) == 3
    assert all(c.ledger is shared for c in ab)
    assert all(isinstance(c.ledger, RankLedger) and c.ledger.shared is shared for c in ranks)  # one server


def test_the_topology_is_one_value_resolved_and_checked_in_one_place(tmp_path: Path) -> None:
    spec = get_launch_spec("cpu-smollm2-x2", environ={"LBEVAL_CACHE": "/c"})
    one = resolve_topology(["http://a/v1"])
    three = resolve_topology(["http://a/v1", "http://b/v1", "http://c/v1"])
    ranks = resolve_topology(["http://a/v1"], None, 4)
    to_start = resolve_topology((), spec)
    assert (one.lanes, one.ranks, one.urls, one.replicated, one.base_url) == (
        1,
        1,
        ("http://a/v1",),
        False,
        "http://a/v1",
    )
    assert (three.lanes, three.routing, len(three.urls), three.lane_urls) == (3, False, 3, three.urls)
    assert (ranks.lanes, ranks.ranks, ranks.routing, ranks.urls) == (4, 4, True, ("http://a/v1",))
    assert ranks.lane_urls == ("http://a/v1",) * 4  # a routing endpoint's one URL, once per rank
    assert (to_start.lanes, to_start.urls, to_start.spec, to_start.to_start) == (2, (), spec, True)
    started = to_start.started(["http://h:1/v1", "http://h:2/v1"])  # once its servers answer: the same lanes
    assert (started.lanes, started.base_url, started.to_start) == (2, "http://h:1/v1", False)
    base = RunConfig(variant="v", inputs=tmp_path / "i.jsonl", topology=one)
    assert [replica_count(replace(base, topology=t)) for t in (one, ranks)] == [1, 4]  # the topology's lanes
    assert base.base_url == "http://a/v1"  # the first endpoint's
    refused = {
        "give --base-url (the server's .../v1 URL)": ((), None, 1),
        "--base-url: at most 64 replicas, got 65": ([f"http://h:{p}/v1" for p in range(1, 66)], None, 1),
        "--dp-ranks 2 routes through one endpoint: give one --base-url (or spec)": (three.urls, None, 2),
    }
    for message, (urls, given, n) in refused.items():
        with pytest.raises(ConfigError) as caught:
            resolve_topology(urls, given, n)
        assert str(caught.value) == message
    with pytest.raises(ConfigError, match="routes through one endpoint"):
        resolve_topology((), spec, 2)  # a spec's 2 replicas are not one endpoint
    with pytest.raises(ConfigError, match="are one server, given 2 times"):
        resolve_topology(["http://localhost:8000/v1", "http://127.0.0.1:8000"])
