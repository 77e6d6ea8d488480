"""eval/analyze/memo.ScoreMemo: the per-record results the stop check keeps between looks. Scoring and comparing
with a memo gives what scoring without one gives; a second scoring of the same records computes nothing again;
a result is kept under the identity of its records, never handed to another record with other content."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.compare import compare
from eval.analyze.memo import ScoreMemo, compare_records
from eval.analyze.score import ScoredRun, load_inputs, score_loaded
from eval.records.run_folder import load_run
from eval.run.runner import execute_run
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two runs of 4 inputs with cold, warm, repeat and the hitlen scenario (attribution pairs); the second
    with a warm/repeat divergence, so the pair results differ between the runs."""
    tmp = tmp_path_factory.mktemp("memo")
    inputs = write_rows(tmp / "inputs.jsonl", [make_row(i, words=40 + 5 * i) for i in range(4)])
    scen = ScenarioSettings(scenarios=("cache", "hitlen"), hit_lengths=(17, 32))
    out = []
    for variant in ("a", "b"):
        with FakeServer() as fake:
            if variant == "b":
                fake.add_fault(Fault("divergence", match="Example ex1:", salt_seen=2, position=1))
            config = config_for(
                fake, inputs, tmp / "runs", variant=variant, passes=("cold", "warm", "repeat")
            )
            out.append(execute_run(replace(config, scenarios=scen)))
    return out[0], out[1]


def _scored(run_dir: Path, memo: ScoreMemo | None) -> ScoredRun:
    loaded = load_run(run_dir)
    return score_loaded(loaded, load_inputs(loaded.manifest, run_dir), memo)


def test_scores_with_a_memo_equal_those_without(run_dirs: tuple[Path, Path]) -> None:
    memo = ScoreMemo()
    plain = [_scored(d, None) for d in run_dirs]
    kept = [_scored(d, memo) for d in run_dirs]
    for p, k in zip(plain, kept, strict=True):
        assert p.scores == k.scores and p.pairs == k.pairs and p.example_scores == k.example_scores
    attribution = plain[1].scores.attribution
    assert attribution is not None and any(r.pairs is not None and r.pairs.n_pairs for r in attribution.rows)
    c_plain, c_kept = compare(*plain, resamples=1), compare(*kept, resamples=1, memo=memo)
    assert c_plain.cross == c_kept.cross and c_plain.cross_agreement == c_kept.cross_agreement
    assert memo.misses > 0 and memo.pairs and memo.outputs


def test_a_second_scoring_of_the_same_records_computes_nothing(run_dirs: tuple[Path, Path]) -> None:
    memo = ScoreMemo()
    loaded = load_run(run_dirs[1])
    rows = load_inputs(loaded.manifest, run_dirs[1])
    first = score_loaded(loaded, rows, memo)
    misses = memo.misses
    second = score_loaded(loaded, rows, memo)
    assert misses > 0 and memo.misses == misses and memo.hits >= misses
    assert first.scores == second.scores


def test_a_result_belongs_to_its_records_only(run_dirs: tuple[Path, Path]) -> None:
    records = [r for r in load_run(run_dirs[0]).records if r.status == "ok" and r.output_token_ids]
    a, b = records[0], records[1]
    memo = ScoreMemo()
    assert memo.pair(a, a) == compare_records(a, a)
    other = replace(
        a,
        output_token_ids=[*(a.output_token_ids or []), 7],
        output_text=(a.output_text or "") + "x",
        topk=None,
    )
    got = memo.pair(other, a)  # another record, one token more: computed, not the (a, a) result
    assert got == compare_records(other, a) and not got.tokens_equal and not got.text_equal
    assert memo.pair(a, b) == compare_records(a, b) and memo.misses == 3 and memo.hits == 0
    assert memo.pair(a, a) == compare_records(a, a) and memo.hits == 1
