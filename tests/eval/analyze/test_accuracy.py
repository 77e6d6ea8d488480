"""eval/analyze/accuracy.py: each dataset is scored by its benchmark's adapter (SCORING, by the registry's name),
a run with LongBench v1 and v2 inputs mixed included; every registered benchmark has an entry, and a benchmark
without one is one clear error. Expected values by hand from the outputs written here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest

from eval.analyze import accuracy as acc
from eval.benchmarks.registry import NoStageEntry, entry_problems
from eval.prepare.inputs import InputRow, sha256_text
from eval.records.final import Selection, select_final
from eval.records.run_folder import load_run
from tests.eval.v2runfactory import V2Run, v2_row, write_v2_inputs, write_v2_run


def qasper_row(item_id: str, answer: str) -> InputRow:
    prompt = f"Answer the question about {item_id}."
    return replace(
        v2_row(item_id, "easy", "short", answer), dataset="qasper", prompt=prompt, prompt_sha256=sha256_text(prompt),
        v2_mode=None, difficulty=None, length_class=None, original_tokens=None,
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


def test_every_registered_benchmark_has_a_scoring_adapter() -> None:
    assert entry_problems(acc.SCORING, acc.WHERE) == []
    assert set(acc.SCORING) == {"longbench", "longbench_v2"}  # the registry's two, by name


def test_each_dataset_is_scored_by_its_benchmark(tmp_path: Path) -> None:
    scores = acc.example_scores(ROWS, mixed(tmp_path), "cold")
    e1, q1, q2 = (scores[r.key] for r in ROWS)
    assert (e1.official, e1.rouge_l, e1.v2_item) == (1.0, None, None)  # v1: the metric, no v2 outcome
    assert q1.official == 1.0 and q1.v2_item is not None and q1.v2_item.pred == "A"
    assert q2.official == 0.0 and q2.v2_item is not None and q2.v2_item.pred == "C"
    datasets = acc.accuracy(ROWS, {"cold": scores})
    assert [(d.dataset, d.metric) for d in datasets] == [("qasper", "qa_f1"), ("longbench_v2", "v2_accuracy")]
    qasper, v2 = datasets
    assert (qasper.passes["cold"].score, qasper.passes["cold"].n_scored, qasper.v2) == (100.0, 1, {})
    assert (v2.passes["cold"].score, v2.passes["cold"].n_scored, v2.passes["cold"].n_total) == (50.0, 2, 2)
    assert v2.v2["cold"].lbeval["easy"] == 100.0 and v2.v2["cold"].lbeval["hard"] == 0.0


def test_a_benchmark_without_a_scoring_adapter_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sel = mixed(tmp_path)
    monkeypatch.setattr(acc, "SCORING", MappingProxyType({"longbench": acc.SCORING["longbench"]}))
    match = r"'longbench_v2' is LongBench v2's .* no entry in eval/analyze/accuracy.SCORING"
    with pytest.raises(NoStageEntry, match=match):
        acc.example_scores(ROWS, sel, "cold")
    with pytest.raises(NoStageEntry, match=match):
        acc.accuracy(ROWS, {})
    assert list(acc.example_scores(ROWS[:1], sel, "cold")) == [ROWS[0].key]  # v1 alone still scores
