"""eval/analyze/accuracy.py: each dataset is scored by its benchmark's adapter (SCORING, by the registry's name),
a run with LongBench v1 and v2 inputs mixed included; every registered benchmark has an entry, and a benchmark
without one is one clear error. Expected values by hand from the outputs written here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze import accuracy as acc
from eval.benchmark_registry import NoStageEntry, entries, entry_problems
from eval.benchmarks.longbench_v2.figures import v2_figures
from eval.prepare.inputs import InputRow, sha256_text
from eval.records.final import Selection, select_final
from eval.records.run_folder import load_run
from eval.report.json_out import accuracy_json
from scorers.longbench_v2 import ItemResult
from tests.eval.benchmarks.swap import without_entry
from tests.eval.v2runfactory import V2Run, v2_row, write_v2_inputs, write_v2_run


def qasper_row(item_id: str, answer: str) -> InputRow:
    prompt = f"Answer the question about {item_id}."
    return replace(
        v2_row(item_id, "easy", "short", answer), dataset="qasper", prompt=prompt, prompt_sha256=sha256_text(prompt),
        extras=None,
    )  # fmt: skip


ROWS = [qasper_row("e1", "yes"), v2_row("q1", "easy", "short", "A"), v2_row("q2", "hard", "long", "B")]
COLD = {
    ("e1", "cold"): "yes",  # qasper's qa_f1 of the answer itself: 1.0
    ("q1", "cold"): "The correct answer is (A)",  # right: 1 point
    ("q2", "cold"): "The correct answer is (C)",  # wrong letter: 0 points
}


def mixed(tmp_path: Path) -> Selection:
    inputs = write_v2_inputs(tmp_path / "inputs.jsonl", ROWS)
    run_dir = write_v2_run(tmp_path / "runs", V2Run("mixed", ROWS, inputs, dict(COLD), passes=("cold",)))
    return select_final(load_run(run_dir).records)


def test_every_loaded_benchmark_has_a_scoring_adapter() -> None:
    assert entry_problems({"SCORING": acc.SCORING}) == []
    assert list(entries(acc.SCORING)) == ["longbench", "longbench_v2"]  # the registry's two, in load order


def test_each_dataset_is_scored_by_its_benchmark(tmp_path: Path) -> None:
    scores = acc.example_scores(ROWS, mixed(tmp_path), "cold")
    e1, q1, q2 = (scores[r.key] for r in ROWS)
    assert (e1.official, e1.rouge_l, e1.extras) == (1.0, None, None)  # v1: the metric, no outcome of its own
    assert q1.official == 1.0 and isinstance(q1.extras, ItemResult) and q1.extras.pred == "A"
    assert q2.official == 0.0 and isinstance(q2.extras, ItemResult) and q2.extras.pred == "C"
    datasets = acc.accuracy(ROWS, {"cold": scores})
    assert [(d.dataset, d.metric) for d in datasets] == [("qasper", "qa_f1"), ("longbench_v2", "v2_accuracy")]
    qasper, v2 = datasets
    assert (qasper.passes["cold"].score, qasper.passes["cold"].n_scored, v2_figures(qasper)) == (100.0, 1, {})
    assert qasper.extras is None
    assert (v2.passes["cold"].score, v2.passes["cold"].n_scored, v2.passes["cold"].n_total) == (50.0, 2, 2)
    assert v2_figures(v2)["cold"].lbeval["easy"] == 100.0 and v2_figures(v2)["cold"].lbeval["hard"] == 0.0
    # scores.json keeps its entries' layout: every entry has v2's key, {} on a v1 dataset
    cold = {"score": 100.0, "n_scored": 1, "n_total": 1, "rouge_l": None}
    v1_entry = {"dataset": "qasper", "metric": "qa_f1", "passes": {"cold": cold}, "v2": {}}
    assert accuracy_json(qasper) == v1_entry and list(accuracy_json(qasper)) == list(v1_entry)
    assert list(accuracy_json(v2)) == ["dataset", "metric", "passes", "v2"]
    assert accuracy_json(v2)["v2"]["cold"]["lbeval"]["easy"] == 100.0


def test_a_benchmark_without_a_scoring_adapter_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sel = mixed(tmp_path)
    without_entry(monkeypatch, "longbench_v2", acc.SCORING)
    match = r"'longbench_v2' is LongBench v2's .* no entry in eval/analyze/accuracy.SCORING"
    with pytest.raises(NoStageEntry, match=match):
        acc.example_scores(ROWS, sel, "cold")
    with pytest.raises(NoStageEntry, match=match):
        acc.accuracy(ROWS, {})
    assert list(acc.example_scores(ROWS[:1], sel, "cold")) == [ROWS[0].key]  # v1 alone still scores
