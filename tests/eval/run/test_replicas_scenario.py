"""The replicas scenario (eval/run/scenarios/replicas.py): each scenario input's cold request and warm twin on
every replica, the attribution rows "replica" / "replica_r<r>" it gives, and the rule that every other pair
compares two records of one replica. Fake servers (tests/support/fake_server.py): a divergence fault on one
replica is a replica that is not interchangeable; the expected rows follow from where the fault is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.agreement import collect_pairs
from eval.analyze.attribution import POINT_REPLICA, Attribution, attribution, pointed_cause
from eval.analyze.compare import compare
from eval.analyze.score import ScoredRun, score_run
from eval.errors import ConfigError
from eval.gate.policy import load_policy, parse_policy
from eval.gate.rules import evaluate
from eval.gate.verdict import FAIL, NO_DATA, PASS, RuleResult
from eval.records import scenarios as sc
from eval.records.cache_model import BLOCKS, CacheModel
from eval.records.final import select_final
from eval.records.manifest_parts import RunSettings
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord
from eval.report.attribution import note, reading
from eval.run.config import endpoints
from eval.run.runner import RunConfig, execute_run
from eval.run.scenarios.plan import plan_scenario_units
from eval.run.scenarios.replicas import plan_replicas
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.eval.records.test_run_folder import make_record
from tests.support.fake_server import FakeServer, Fault

N_REPLICAS = 3
SCENARIO_INPUTS = 2
FAULT_AT = 2  # the faulty replica's outputs differ from this generated position on
SETTINGS = ScenarioSettings(scenarios=("cache", "replicas"), inputs=SCENARIO_INPUTS, max_tokens=4)


@pytest.fixture(name="fakes")
def fakes_fixture() -> Iterator[list[FakeServer]]:
    with ExitStack() as stack:
        yield [stack.enter_context(FakeServer()) for _ in range(N_REPLICAS)]


def replicated(servers: list[FakeServer], tmp_path: Path, name: str) -> RunConfig:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=40 + 10 * i) for i in range(6)])
    config = config_for(servers[0], inputs, tmp_path / "runs", variant=name, passes=("cold", "warm"))
    return replace(config, topology=endpoints(*(s.base_url for s in servers)), scenarios=SETTINGS)


def att(run: ScoredRun) -> Attribution:
    a = run.scores.attribution
    assert a is not None
    return a


# ---------------------------------------------------------------- the plan


def test_the_unit_is_a_cold_and_a_warm_on_each_replica_in_turn() -> None:
    steps = plan_replicas(3, 4)
    assert [(s.pass_name, s.repetition, s.replica, s.expect) for s in steps] == [
        ("replicas_cold", 0, 0, "miss"), ("replicas_warm", 0, 0, "hit"),
        ("replicas_cold", 1, 1, "miss"), ("replicas_warm", 1, 1, "hit"),
        ("replicas_cold", 2, 2, "miss"), ("replicas_warm", 2, 2, "hit"),
    ]  # fmt: skip
    assert len({s.salt_key for s in steps}) == 3  # one salt per replica: its warm finds its own cold's blocks
    assert all(dict(s.variation) == {sc.REPLICA: s.replica, sc.REPLICAS: 3} for s in steps)
    assert plan_replicas(1, 4) == []


def test_one_replica_plans_nothing_in_the_default_plan_and_refuses_the_named_scenario() -> None:
    rows = [make_row(i) for i in range(12)]
    plan = ScenarioSettings(scenarios=("cache", "replicas"), inputs=1, default_plan=True)
    kw = {"token_ids": {}, "cache_model": CacheModel(BLOCKS, 16), "max_tokens_override": None}
    assert plan_scenario_units(plan, rows, replicas=1, **kw) == []  # type: ignore[arg-type]
    assert [u.kind for u in plan_scenario_units(plan, rows, replicas=2, **kw)] == ["replicas"]  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs 2 or more replicas"):
        plan_scenario_units(replace(plan, default_plan=False), rows, replicas=1, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- a run on fake replicas


def test_every_replica_gets_the_cold_request_and_its_warm_twin(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    loaded = load_run(execute_run(replicated(fakes, tmp_path, "v")))
    assert loaded.manifest.complete
    mine = [r for r in loaded.records if r.scenario == "replicas"]
    assert len(mine) == SCENARIO_INPUTS * N_REPLICAS * 2
    for r in mine:
        assert r.replica == r.variation[sc.REPLICA] and r.status == "ok"
        salts = {body.get("cache_salt") for _, body in fakes[r.replica].requests}
        assert r.cache_salt in salts  # sent to the replica it names
        cached = r.usage.cached_tokens or 0
        assert cached == 0 if r.pass_name == "replicas_cold" else cached > 0
    by_input = {(r.example_id, r.replica) for r in mine}
    assert len(by_input) == SCENARIO_INPUTS * N_REPLICAS
    # each replica's cold and warm twin ran in that replica's turn: nothing else was sent to the replica between
    # the two (send order), and nothing else was in flight there while either was
    for r in mine:
        others = [o for o in loaded.records if o.replica == r.replica and o.scenario != "replicas"]
        twin = next(
            t
            for t in mine
            if (t.example_id, t.replica) == (r.example_id, r.replica) and t.pass_name != r.pass_name
        )
        low, high = sorted((r.seq, twin.seq))
        assert not [o for o in others if low < o.seq < high]
        assert r.timings is not None
        start, end = r.timings.sent_at, r.timings.sent_at + (r.timings.done_s or 0.0)
        for o in others:
            assert o.timings is not None
            assert o.timings.sent_at >= end or o.timings.sent_at + (o.timings.done_s or 0.0) <= start


def test_a_replica_that_differs_shows_in_its_sub_row_only(fakes: list[FakeServer], tmp_path: Path) -> None:
    fakes[2].add_fault(Fault("divergence", times=-1, position=FAULT_AT))
    a = att(score_run(execute_run(replicated(fakes, tmp_path, "v"))))
    head, r1, r2 = (a.row(k) for k in ("replica", "replica_r1", "replica_r2"))
    assert head is not None and r1 is not None and r2 is not None
    per_replica = SCENARIO_INPUTS * 2  # cold and warm per input
    assert head.measured and head.pairs is not None and head.pairs.n_total == per_replica * (N_REPLICAS - 1)
    assert r1.pairs is not None and r1.pairs.tokens_equal == r1.pairs.n_total == per_replica
    assert r1.pairs.max_delta == 0.0
    assert r2.pairs is not None and (r2.pairs.n_total, r2.pairs.tokens_equal) == (per_replica, 0)
    assert {d.position for d in r2.pairs.divergences} == {FAULT_AT}
    assert (r1.level, r1.value, r2.value) == (1, 1, 2)
    assert a.replicas == N_REPLICAS
    pointer = pointed_cause(a)
    assert pointer.kind == POINT_REPLICA and [r.key for r in pointer.sub_rows] == ["replica_r2"]
    assert "differences between replicas" in reading(a)
    assert f"This run ran on {N_REPLICAS} replicas" in note(a)


def test_one_server_reports_the_replica_row_not_run(fakes: list[FakeServer], tmp_path: Path) -> None:
    plan = replace(SETTINGS, default_plan=True)
    config = replace(replicated(fakes[:1], tmp_path, "one"), scenarios=plan)
    run = score_run(execute_run(config))
    row = att(run).row("replica")
    assert row is not None and not row.measured and row.condition == "one replica: not run"
    assert att(run).row("replica_r1") is None and "replicas" not in note(att(run))
    assert not [r for r in run.loaded.records if r.scenario == "replicas"]


# ---------------------------------------------------------------- one replica per pair


def rec(pass_name: str, replica: int, **kw: object) -> RequestRecord:
    return replace(make_record(pass_name=pass_name, topk=None, **kw), replica=replica)


def test_a_cold_warm_pair_across_replicas_is_invalid_never_compared() -> None:
    sel = select_final([rec("cold", 0), rec("warm", 1, seq=1, cache_salt="s")])
    pairs, counts = collect_pairs([("qasper", "e1")], sel, "cold", "warm", 1)
    assert pairs == [] and counts == {"invalid": 1}
    same = select_final([rec("cold", 1), rec("warm", 1, seq=1)])
    pairs, counts = collect_pairs([("qasper", "e1")], same, "cold", "warm", 1)
    assert len(pairs) == 1 and counts == {"ok": 1}
    # base vs variant (two runs): other servers by definition, compared
    pairs, counts = collect_pairs([("qasper", "e1")], sel, "cold", "cold", 1, sel_b=same)
    assert len(pairs) == 1


def test_a_scenario_pair_across_replicas_is_invalid_and_a_misrouted_replicas_record_too() -> None:
    key = ("qasper", "e1")
    traffic = [
        rec("traffic_warm_idle", 0, scenario="traffic"),
        rec("traffic_warm", 1, seq=1, scenario="traffic"),
        rec("traffic_cold", 1, seq=2, scenario="traffic"),
    ]
    vary = {sc.REPLICAS: 2}
    replicas = [
        rec("replicas_cold", 0, seq=3, scenario="replicas", variation={**vary, sc.REPLICA: 0}),
        rec("replicas_cold", 0, seq=4, repetition=1, scenario="replicas", variation={**vary, sc.REPLICA: 1}),
        rec("replicas_warm", 0, seq=5, scenario="replicas", variation={**vary, sc.REPLICA: 0}),
        rec("replicas_warm", 1, seq=6, repetition=1, scenario="replicas", variation={**vary, sc.REPLICA: 1}),
    ]
    settings = RunSettings.from_dict({"scenarios": ["cache", "traffic", "replicas"]})
    a = attribution([key], select_final(traffic + replicas), settings, {})
    t, vs_cold = a.row("traffic"), a.row("traffic_vs_cold")
    assert t is not None and t.pairs is not None and (t.pairs.invalid, t.pairs.n_pairs) == (1, 0)
    assert vs_cold is not None and vs_cold.pairs is not None and vs_cold.pairs.n_pairs == 1  # both replica 1
    r1 = a.row("replica_r1")
    # cold: sent to replica 1, answered by replica 0 (a router that ignored the pin): invalid; warm: compared
    assert r1 is not None and r1.pairs is not None and (r1.pairs.invalid, r1.pairs.n_pairs) == (1, 1)


# ---------------------------------------------------------------- the gate


def cause_rows_result(base: ScoredRun, variant: ScoredRun) -> RuleResult:
    v = evaluate(compare(base, variant), load_policy(None))
    return next(r for r in v.results if r.rule == "cause_rows")


def test_cause_rows_gates_the_replica_rows_against_a_base_on_replicas(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    base = score_run(execute_run(replicated(fakes, tmp_path, "base")))
    clean = score_run(execute_run(replicated(fakes, tmp_path, "clean")))
    assert cause_rows_result(base, clean).status == PASS
    fakes[1].add_fault(Fault("divergence", times=-1, position=FAULT_AT))
    faulty = score_run(execute_run(replicated(fakes, tmp_path, "faulty")))
    r = cause_rows_result(base, faulty)
    assert r.status == FAIL and "replica_r1" in r.measured and "replica_r2" not in r.measured


def test_replica_rows_measured_by_one_run_only_give_no_verdict(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    # a one-server base against a variant on 2 replicas whose second replica gives other outputs: the base has
    # no replica row to hold the variant's against, so no verdict (not a PASS), unless the policy skips them
    one = replace(replicated(fakes[:1], tmp_path, "one"), scenarios=replace(SETTINGS, default_plan=True))
    base = score_run(execute_run(one))
    fakes[1].add_fault(Fault("divergence", times=-1, position=FAULT_AT))
    variant = score_run(execute_run(replicated(fakes[:2], tmp_path, "two")))
    assert not variant.scores.run.damage and variant.scores.run.complete  # its units on their replicas
    row = att(variant).row("replica_r1")
    assert row is not None and row.pairs is not None and row.pairs.tokens_equal < row.pairs.n_total
    v = evaluate(compare(base, variant), load_policy(None))
    r = next(x for x in v.results if x.rule == "cause_rows")
    assert r.status == NO_DATA and v.exit_code != 0, r.measured  # never a PASS (cross_variant_cold may FAIL)
    assert "not comparable: " in r.measured and "replica_r1 (measured by the variant run only)" in r.measured
    skip = parse_policy("schema_version = 1\n[rules.cause_rows]\nskip_one_sided = true\n", "skip.toml")
    r = next(x for x in evaluate(compare(base, variant), skip).results if x.rule == "cause_rows")
    assert r.status == PASS and "replica_r1 (measured by the variant run only)" in r.measured


def test_the_replica_rows_follow_the_replicas_planned_not_every_replica_a_record_names() -> None:
    """A resume from 3 replicas to 2: a cache unit complete on replica 2 stays, the replicas unit re-ran for 2."""
    key = ("qasper", "e1")
    vary = {sc.REPLICAS: 2}
    recs = [rec("cold", 2)] + [
        rec(p, r, seq=1 + 2 * r + k, repetition=r, scenario="replicas", variation={**vary, sc.REPLICA: r})
        for r in range(2)
        for k, p in enumerate(("replicas_cold", "replicas_warm"))
    ]
    a = attribution(
        [key], select_final(recs), RunSettings.from_dict({"scenarios": ["cache", "replicas"]}), {}
    )
    assert a.replicas == 2 and a.row("replica_r1") is not None and a.row("replica_r2") is None
    no_scenario = attribution(
        [key], select_final(recs[:1]), RunSettings.from_dict({"scenarios": ["cache", "replicas"]}), {}
    )
    row = no_scenario.row("replica_r2")  # 3 replicas named, no replicas record: every pair missing, counted
    assert row is not None and row.pairs is not None and row.pairs.missing == row.pairs.n_total == 2
