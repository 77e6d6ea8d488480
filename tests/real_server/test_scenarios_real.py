"""The batch and hitlen scenarios against the real vLLM CPU server (block size 128).

Two of the four mini inputs (one Qasper, one GovReport; 8 output tokens), batch sizes 1 and 4 (the fillers are
the other inputs' prompts), the default hit lengths. Expected values come from the records and vLLM's rule
(whole blocks of 128, never the last prompt token), never from a run: every record is complete, every primed
request finds floor(min(L, n-1)/128)*128 cached tokens, and scores.json's attribution figures equal what the
records say. Whether batching or a partial hit changes the numbers is the server's business, not asserted.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from eval.analyze.score import score_run
from eval.records.final import select_final
from eval.records.run_folder import LoadedRun, load_run
from eval.records.types import RequestRecord
from eval.report.json_out import scores_json
from eval.run.scenarios.hitlen import hit_lengths
from tests.real_server.conftest import RealServer
from tests.real_server.test_real_server import (  # noqa: F401 - fixtures
    BLOCK,
    OUT_TOKENS,
    full_blocks,
    independent_pair,
    inputs,
    lbeval,
    run_args,
    work,
)

pytestmark = pytest.mark.real_server

SCENARIO_INPUTS = 2
SIZES = (1, 4)


@pytest.fixture(scope="module")
def scenario_run(real_server: RealServer, inputs: Path, work: Path) -> LoadedRun:  # noqa: F811 - fixtures
    argv = run_args(real_server, inputs, work, "scenarios", "--scenarios", "batch,hitlen")
    argv += ["--batch-sizes", ",".join(map(str, SIZES)), "--scenario-inputs", str(SCENARIO_INPUTS)]
    assert lbeval(*argv) == 0
    return load_run(work / "runs" / "cpu-smollm2" / "scenarios")


def finals(run: LoadedRun) -> list[RequestRecord]:
    return list(select_final(run.records).final.values())


def test_every_planned_request_has_a_whole_record(scenario_run: LoadedRun) -> None:
    m = scenario_run.manifest
    assert m.complete and m.settings.scenarios == ["batch", "hitlen"], m.stats
    assert m.settings.hit_budget == 2048  # max_num_batched_tokens from /server_info (the CPU default)
    recs = finals(scenario_run)
    assert len(recs) == m.expected_records == len(scenario_run.records)  # nothing retried, nothing superseded
    assert all(r.status == "ok" for r in recs), [(r.pass_name, r.error) for r in recs if r.status != "ok"]
    cold = {r.example_id: r for r in recs if r.pass_name == "hitlen_cold"}
    assert len(cold) == SCENARIO_INPUTS
    counts = Counter(r.pass_name for r in recs)
    n_lengths = sum(len(hit_lengths(c.usage.prompt_tokens or 0, BLOCK, budget=2048)) for c in cold.values())
    assert counts["hitlen_prime"] == counts["hitlen_full"] == n_lengths
    assert counts["batch_member"] == counts["batch_warm_member"] == SCENARIO_INPUTS
    assert counts["batch_filler"] == SCENARIO_INPUTS * 2 * (4 - 1)
    for r in recs:
        assert r.topk is not None and r.output_token_ids and len(r.topk.ids) == len(r.output_token_ids)
        expected_len = 1 if r.pass_name == "hitlen_prime" else OUT_TOKENS
        assert len(r.output_token_ids) == expected_len or r.finish_reason == "stop"


def test_every_request_had_the_cache_state_it_must(scenario_run: LoadedRun) -> None:
    checked = 0
    for r in finals(scenario_run):
        n, cached = r.usage.prompt_tokens, r.usage.cached_tokens
        assert n is not None and cached is not None
        if r.pass_name == "hitlen_full":
            length = r.variation["hit_len"]
            assert n == r.variation["prompt_ids"]  # the IDs sent are the prompt the server saw
            assert cached == min(length, n - 1) // BLOCK * BLOCK == r.expected_cached_tokens, (
                length,
                n,
                cached,
            )
            checked += 1
        elif r.pass_name == "hitlen_prime":
            assert n == r.variation["hit_len"] and cached == 0
        elif r.pass_name in ("batch_warm_alone", "batch_warm_member"):
            assert cached == full_blocks(n)
        else:
            assert cached == 0, r.pass_name
    assert checked > 0


def test_scores_json_attribution_is_what_the_records_say(scenario_run: LoadedRun) -> None:
    assert lbeval("score", str(scenario_run.run_dir)) == 0
    scores = json.loads((scenario_run.run_dir / "scores.json").read_text())
    assert scores == json.loads(json.dumps(scores_json(score_run(scenario_run.run_dir))))
    rows = {r["key"]: r for r in scores["attribution"]["rows"]}
    recs = finals(scenario_run)
    one = {(r.example_id, r.pass_name, json.dumps(r.variation, sort_keys=True)): r for r in recs}

    def pick(ex: str, pass_name: str, **vary: object) -> RequestRecord:
        found = [r for (e, p, _), r in one.items() if e == ex and p == pass_name]
        found = [r for r in found if all(r.variation.get(k) == v for k, v in vary.items())]
        assert len(found) == 1, (ex, pass_name, vary)
        return found[0]

    inputs_ = sorted({r.example_id for r in recs})
    for key, a, b in (
        ("batch_b4", "batch_alone", "batch_member"),
        ("batch_warm_b4", "batch_warm_alone", "batch_warm_member"),
    ):
        pairs = [independent_pair(pick(ex, a), pick(ex, b, batch_size=4)) for ex in inputs_]
        got = rows[key]["pairs"]
        assert got["n_total"] == got["n_pairs"] == len(pairs) == SCENARIO_INPUTS
        assert got["tokens_equal"] == sum(equal for equal, _ in pairs)
        assert got["max_delta"] == max(delta for _, delta in pairs)
    classes = Counter(r.variation["hit_class"] for r in recs if r.pass_name == "hitlen_full")
    for name, count in classes.items():
        fulls = [r for r in recs if r.pass_name == "hitlen_full" and r.variation["hit_class"] == name]
        pairs = [independent_pair(pick(r.example_id, "hitlen_cold"), r) for r in fulls]
        row = next(
            r for r in rows.values() if r["level"] == 1 and r["value"] == name and r["scenario"] == "hitlen"
        )
        assert row["pairs"]["n_total"] == count == len(pairs)
        assert row["pairs"]["tokens_equal"] == sum(equal for equal, _ in pairs)
        assert row["pairs"]["max_delta"] == max(delta for _, delta in pairs)
        honoured = sum(r.usage.cached_tokens == r.expected_cached_tokens for r in fulls)
        assert row["hits"]["honoured"] == honoured and row["hits"]["total"] == count
    head = rows["hitlen"]["hits"]
    assert head["total"] == sum(classes.values()) and head["honoured"] == head["total"]  # every hit honoured
