"""Two real vLLM CPU replicas: `lbeval run --spec cpu-smollm2-x2` (two one-core servers started by lbeval).

Inputs: 1 Qasper and 1 GovReport row of the shipped longbench-mini sample (prompts of about 800-1,400 tokens,
tokenized by the model's own tokenizer files, so no server is needed to prepare), 16 output tokens, the cache
passes (cold, warm, repeat, one timing repetition, the controls) and the replicas scenario. Expected values
come from the records and vLLM's rule (whole blocks of 128, never the last prompt token), never from a run:
every record names a replica, every unit's cache relations are on one replica, each replica's replicas_warm
finds its own replicas_cold's blocks, and the attribution row "replica" holds what the records say. Whether
the two replicas give the same tokens is the servers' business, not asserted.

This module does not use the session's one-server fixture (real_server): lbeval starts and stops its own two
servers. Run it alone under `flock /tmp/real-server.lock` (one real-server job at a time on this machine).

`LBEVAL_REPLICAS_RUN=RUN_DIR` points the same checks at a run folder made by hand with `--spec cpu-smollm2-x2
--scenarios cache,replicas` (docs/servers/replicas.md: the 12 mini inputs) instead of making the 2-input one;
the number of inputs then comes from that run's inputs file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eval.analyze.attribution import Attribution
from eval.analyze.score import load_inputs, score_run
from eval.cli import main
from eval.records import scenarios as sc
from eval.records.final import select_final, unit_of
from eval.records.run_folder import LoadedRun, load_run
from eval.records.types import RequestRecord
from tests.real_server.conftest import build_server
from tests.real_server.mini import prepare_mini

pytestmark = pytest.mark.real_server

SPEC = "cpu-smollm2-x2"
N_REPLICAS = 2
BLOCK = 128
OUT_TOKENS = 16
RUN_ENV = "LBEVAL_REPLICAS_RUN"


def full_blocks(prompt_tokens: int) -> int:
    return (prompt_tokens - 1) // BLOCK * BLOCK


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> LoadedRun:
    given = os.environ.get(RUN_ENV)
    if given:
        return load_run(Path(given))
    build_server()
    work = tmp_path_factory.mktemp("replicas")
    inputs = work / "inputs.jsonl"
    prepare_mini(inputs, extra=("--max-tokens", f"qasper={OUT_TOKENS},gov_report={OUT_TOKENS}"))
    argv = ["run", "--variant", SPEC, "--spec", SPEC, "--inputs", str(inputs), "--out", str(work / "runs")]
    argv += ["--run-id", "x2", "--quiet", "--timing-reps", "1", "--scenarios", "cache,replicas"]
    assert main(argv) == 0
    return load_run(work / "runs" / SPEC / "x2")


def n_inputs(run: LoadedRun) -> int:
    return len(load_inputs(run.manifest, run.run_dir))


def finals(run: LoadedRun) -> list[RequestRecord]:
    return list(select_final(run.records).final.values())


def test_the_run_is_complete_on_two_replicas_and_every_record_names_one(run: LoadedRun) -> None:
    m = run.manifest
    assert m.complete, m.stats
    replicas = m.sessions[-1].replicas or []
    assert [r.replica for r in replicas] == list(range(N_REPLICAS))
    assert len({r.base_url for r in replicas}) == N_REPLICAS  # two servers, two ports
    recs = finals(run)
    assert len(recs) == m.expected_records
    assert all(r.status == "ok" for r in recs), [
        (r.pass_name, r.replica, r.error) for r in recs if r.status != "ok"
    ]
    assert {r.replica for r in run.records} == set(range(N_REPLICAS))
    assert len({r.example_id for r in recs}) == n_inputs(run)


def test_every_units_cache_relations_are_on_one_replica(run: LoadedRun) -> None:
    """Each group of a cache unit (the main unit: cold, warm, repeat, controls; a timing repetition, placed by
    cost) on one replica, and each input's main unit on one: the warm found its cold's blocks there."""
    groups: dict[tuple[object, int], set[int]] = {}
    main: dict[str, set[int]] = {}
    for r in run.records:
        if r.scenario == "cache":
            groups.setdefault((unit_of(r), r.group), set()).add(r.replica)
            if unit_of(r).kind == "main":
                main.setdefault(r.example_id, set()).add(r.replica)
    assert groups and all(len(v) == 1 for v in groups.values()), groups
    assert main and all(len(v) == 1 for v in main.values()), main
    for r in finals(run):
        if r.pass_name in ("warm", "repeat", "timing_warm"):
            assert r.usage.prompt_tokens is not None
            assert r.usage.cached_tokens == full_blocks(r.usage.prompt_tokens), (r.pass_name, r.replica)


def test_each_replica_ran_the_cold_request_and_its_warm_twin(run: LoadedRun) -> None:
    mine = [r for r in finals(run) if r.scenario == "replicas"]
    assert len(mine) == n_inputs(run) * N_REPLICAS * 2
    for r in mine:
        assert r.replica == r.variation[sc.REPLICA] and r.variation[sc.REPLICAS] == N_REPLICAS
        assert r.usage.prompt_tokens is not None
        expected = 0 if r.pass_name == "replicas_cold" else full_blocks(r.usage.prompt_tokens)
        assert r.usage.cached_tokens == expected, (r.example_id, r.pass_name, r.replica)
    # each replica's turn: on a replica, an input's replicas_warm is the next record after its replicas_cold
    # (one unit at a time per replica: nothing else was sent there between the twins)
    for replica in range(N_REPLICAS):
        order = sorted((r for r in run.records if r.replica == replica), key=lambda r: r.seq)
        for i, r in enumerate(order):
            if r.pass_name == "replicas_cold":
                twin = order[i + 1]
                assert (twin.pass_name, twin.example_id) == ("replicas_warm", r.example_id), (replica, r.seq)


def attribution_of(run: LoadedRun) -> Attribution:
    a = score_run(run.run_dir).scores.attribution
    assert a is not None
    return a


def test_the_replica_row_says_what_the_records_say(run: LoadedRun) -> None:
    by = {(r.example_id, r.pass_name, r.replica): r for r in finals(run) if r.scenario == "replicas"}
    pairs = [
        (by[(k, p, 0)], by[(k, p, 1)])
        for k in sorted({key[0] for key in by})
        for p in ("replicas_cold", "replicas_warm")
    ]
    equal = sum(a.output_token_ids == b.output_token_ids for a, b in pairs)
    a = attribution_of(run)
    assert a.replicas == N_REPLICAS
    for key in ("replica", "replica_r1"):
        row = a.row(key)
        assert row is not None and row.measured and row.pairs is not None, key
        assert (row.pairs.n_total, row.pairs.n_pairs, row.pairs.tokens_equal) == (
            len(pairs),
            len(pairs),
            equal,
        )
