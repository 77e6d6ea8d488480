"""The official eval.py rules: dataset table, first-line rule, best over answers, aggregates, buckets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scorers.longbench import (
    DATASET_METRIC,
    LONGBENCH_E_DATASETS,
    base_dataset,
    dataset_score,
    longbench_e_scores,
    score_example,
)
from scorers.longbench.normalize import FIRST_LINE_DATASETS


def test_the_21_datasets_and_their_metrics() -> None:
    expected = {
        "qa_f1": {"narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique", "triviaqa"},
        "qa_f1_zh": {"multifieldqa_zh"},
        "rouge": {"gov_report", "qmsum", "multi_news", "samsum"},
        "rouge_zh": {"dureader", "vcsum"},
        "classification": {"trec", "lsht"},
        "retrieval": {"passage_retrieval_en"},
        "retrieval_zh": {"passage_retrieval_zh"},
        "count": {"passage_count"},
        "code_sim": {"lcc", "repobench-p"},
    }
    assert len(DATASET_METRIC) == 21
    assert {m: {d for d, k in DATASET_METRIC.items() if k == m} for m in expected} == expected
    assert set(LONGBENCH_E_DATASETS) < set(DATASET_METRIC) and len(LONGBENCH_E_DATASETS) == 13
    assert {"trec", "triviaqa", "samsum", "lsht"} == FIRST_LINE_DATASETS


def test_first_line_rule_applies_only_to_its_four_datasets() -> None:
    pred = "\n\nParis\nThe capital"
    assert score_example("triviaqa", pred, ["Paris"], None) == 1.0
    # without the rule: [paris, capital] vs [paris] -> 2/3
    assert score_example("narrativeqa", pred, ["Paris"], None) == pytest.approx(2 / 3, abs=1e-15)
    classes = ["City", "Country"]
    assert score_example("trec", "\n\nCity\nCountry", ["City"], classes) == 1.0
    assert score_example("lsht", "体育\n农业", ["农业"], ["体育", "农业"]) == 0.0
    # samsum: first line identical to the reference -> U=3, m=n=3 -> 2 * (1 / (2 + 1e-8))
    assert score_example("samsum", "\nJohn will come.\nMary will not.", ["John will come."], None) == 2.0 * (
        1.0 / (2.0 + 1e-8)
    )


def test_best_over_answers_starts_from_zero() -> None:
    assert score_example("qasper", "anything", [], None) == 0.0
    assert score_example("qasper", "Paris", ["London", "Paris", "Paris France"], None) == 1.0
    assert score_example("passage_count", "3 4", ["3", "4"], None) == 0.5
    assert score_example("gov_report", "", ["a b"], None) == 0.0


def test_longbench_e_names_and_unknown_names() -> None:
    assert base_dataset("qasper_e") == "qasper"
    assert score_example("qasper_e", "Paris, France", ["Paris"], None) == score_example(
        "qasper", "Paris, France", ["Paris"], None
    )
    with pytest.raises(KeyError):
        base_dataset("squad")
    with pytest.raises(KeyError):
        score_example("qasper_x", "a", ["a"], None)


def test_dataset_score_is_round_100_mean_2() -> None:
    assert dataset_score([1.0, 0.0, 0.5]) == 50.0
    assert dataset_score([1 / 3]) == 33.33
    assert dataset_score([2 / 3, 2 / 3, 1.0]) == 77.78
    with pytest.raises(ValueError):
        dataset_score([])


def test_dataset_score_sums_like_the_official_scorer_not_like_numpy() -> None:
    # exact mean 0.54375: a tie at two decimals that the float arithmetic decides
    scores = [0.25, 1.0, 1 / 3, 0.9, 1 / 3, 1 / 3, 0.5, 0.7]
    total = 0.0
    for s in scores:  # the official `scorer`: Python floats, left to right, then 100 * total / n
        total += s
    assert round(100 * total / len(scores), 2) == 54.38
    assert dataset_score(scores) == 54.38
    # the LongBench-E path of the same eval.py uses numpy's mean and rounding and prints 54.37
    assert float(round(100 * np.mean(scores), 2)) == 54.37
    assert longbench_e_scores(scores, [100] * len(scores))["0-4k"] == 54.37


def test_longbench_e_buckets() -> None:
    result = longbench_e_scores([1.0, 0.5, 0.25, 0.0, 1.0], [3999, 4000, 7999, 8000, 120000])
    assert list(result) == ["0-4k", "4-8k", "8k+"]
    assert result == {"0-4k": 100.0, "4-8k": 37.5, "8k+": 50.0}


def test_longbench_e_empty_bucket_is_nan_and_rounding_is_numpys() -> None:
    result = longbench_e_scores([0.00005], [10])
    assert math.isnan(result["4-8k"]) and math.isnan(result["8k+"])
    # 100 * 0.00005 = 0.005: numpy rounds its float64 (x*100, rint, /100) to 0.0; Python's round gives 0.01
    assert round(100 * 0.00005, 2) == 0.01
    assert result["0-4k"] == 0.0
    with pytest.raises(ValueError):
        longbench_e_scores([1.0], [])
