"""Record schema 2 (scenario, variation), reading version 1, and the final-record rule for scenario units."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from eval.records.codec import dumps_record, record_from_dict
from eval.records.final import UnitKey, select_final, unit_of
from eval.records.run_folder import ManifestError, read_manifest, write_manifest
from eval.records.scenarios import SCENARIOS, parse_scenarios, scenario_inputs
from eval.records.types import RECORD_SCHEMA_VERSION, RequestRecord
from eval.records.vocabulary import (
    ALL_PASSES,
    RECORD_PASSES,
    SCENARIO_NAMES,
    SCENARIO_PASSES,
    choice_of,
    scenario_of,
    unit_kind,
)
from tests.eval.records.test_run_folder import make_manifest, make_record


def v1_line(rec: RequestRecord) -> dict[str, object]:
    """The line lbeval wrote before scenarios: schema_version 1, no scenario and variation fields."""
    obj = json.loads(dumps_record(rec))
    del obj["scenario"], obj["variation"], obj["replica"]
    obj["schema_version"] = 1
    return obj


def test_version_2_round_trips_scenario_and_variation() -> None:
    assert (
        RECORD_SCHEMA_VERSION == 3
    )  # 3 adds server_foreign, cache_finding (test_server_figures.py) and replica
    rec = make_record(
        pass_name="batch_member", repetition=1, scenario="batch", variation={"batch_size": 4, "slot": 0}
    )
    back = record_from_dict(json.loads(dumps_record(rec)))
    assert back.scenario == "batch" and back.variation == {"batch_size": 4, "slot": 0}
    assert replace(back, topk=None) == replace(rec, topk=None)


def test_version_1_records_read_as_cache_scenario_records() -> None:
    back = record_from_dict(v1_line(make_record()))
    assert back.schema_version == 1 and back.scenario == "cache" and back.variation == {}
    with pytest.raises(ValueError, match="unknown field 'scenario'"):  # a version 1 line never had it
        record_from_dict({**v1_line(make_record()), "scenario": "batch"})
    with pytest.raises(ValueError, match="reads 1, 2, 3"):
        record_from_dict({**v1_line(make_record()), "schema_version": 0})


def test_version_1_and_2_manifests_are_read(tmp_path: Path) -> None:
    for version in (1, 2, 3):
        write_manifest(tmp_path, make_manifest(schema_version=version))
        assert read_manifest(tmp_path).schema_version == version
    write_manifest(tmp_path, make_manifest(schema_version=4))
    with pytest.raises(ManifestError, match="schema_version"):
        read_manifest(tmp_path)


def test_the_vocabulary_names_every_scenario_pass_once() -> None:
    assert len(ALL_PASSES) == len(set(ALL_PASSES))
    assert (
        SCENARIO_NAMES == tuple(SCENARIOS) == ("cache", "batch", "hitlen", "repeats", "traffic", "replicas")
    )
    for name, spec in SCENARIOS.items():
        assert spec.passes == (RECORD_PASSES if name == "cache" else SCENARIO_PASSES[name])
        for pair in spec.pairs:
            assert {pair.a, pair.b} <= set(spec.passes), pair.key
        for p in spec.passes:
            assert scenario_of(p) == name
    assert unit_kind("hitlen_full") == choice_of("hitlen_full") == "hitlen"
    assert (
        unit_kind("timing_warm") == "timing"
        and unit_kind("warm") == "main"
        and choice_of("control_salt") == "controls"
    )


def test_scenario_units_are_their_own_groups() -> None:
    """A scenario unit re-run as group 1 supersedes its own group 0, never the cache scenario's records of the
    same input (the unit's identity includes its scenario)."""
    cold = make_record(pass_name="cold", seq=0)
    alone0 = make_record(pass_name="batch_alone", scenario="batch", seq=1, group=0)
    member0 = make_record(pass_name="batch_member", scenario="batch", seq=2, group=0, status="error")
    alone1 = make_record(pass_name="batch_alone", scenario="batch", seq=3, group=1)
    hit = make_record(pass_name="hitlen_full", scenario="hitlen", seq=4, repetition=3)
    assert unit_of(alone0) == UnitKey("qasper", "e1", "batch", 0)
    assert unit_of(hit) == UnitKey("qasper", "e1", "hitlen", 0)  # every hit length is in the input's one unit
    sel = select_final([cold, alone0, member0, alone1, hit])
    assert sel.superseded == 2
    assert {(s.pass_name, r.group) for s, r in sel.final.items()} == {
        ("cold", 0),
        ("batch_alone", 1),
        ("hitlen_full", 0),
    }


def test_parse_scenarios_and_scenario_inputs() -> None:
    assert parse_scenarios("traffic, cache,batch,cache") == ("cache", "batch", "traffic")
    with pytest.raises(ValueError, match="unknown scenario 'x'"):
        parse_scenarios("cache,x")
    keys = [("qasper", "a"), ("qasper", "b"), ("qasper", "c"), ("gov", "a"), ("gov", "b")]
    assert scenario_inputs(keys, None) == [0, 1, 2, 3, 4]
    assert scenario_inputs(keys, 3) == [0, 1, 3]  # round robin over the datasets, in manifest order
    assert scenario_inputs(keys, 9) == [0, 1, 2, 3, 4]


def test_version_2_records_read_as_replica_0_and_version_3_round_trips_the_replica() -> None:
    obj = json.loads(dumps_record(make_record()))
    del obj["replica"]
    obj["schema_version"] = 2
    back = record_from_dict(obj)
    assert back.schema_version == 2 and back.replica == 0
    with pytest.raises(ValueError, match="unknown field 'replica'"):  # a version 2 line never had it
        record_from_dict({**obj, "replica": 1})
    rec = make_record()
    rec3 = record_from_dict(json.loads(dumps_record(replace(rec, replica=3))))
    assert rec3.replica == 3 and rec3.schema_version == 3
