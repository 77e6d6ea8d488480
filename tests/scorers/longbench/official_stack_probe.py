"""Test-only probe: run the `rouge` package with the official eval.py's call nesting, as a top-level script.

Reads a JSON list of [metric, prediction, reference] from stdin and prints a JSON list of scores. The
nesting mirrors `python eval.py`: module code -> a per-dataset scorer -> the metric (rouge_zh adds one
function that calls the rouge one) -> `Rouge().get_scores`, exceptions -> 0.0. It is a stand-in written
for these tests, not the official code; run it as a script (its stack depth is the point).
"""

import json
import sys

import jieba
from rouge import Rouge


def rouge_like(prediction, reference, **kwargs):
    try:
        scores = Rouge().get_scores([prediction], [reference], avg=True)
    except Exception:  # the official metric catches everything
        return 0.0
    return scores["rouge-l"]["f"]


def rouge_zh_like(prediction, reference, **kwargs):
    prediction = " ".join(list(jieba.cut(prediction, cut_all=False)))
    reference = " ".join(list(jieba.cut(reference, cut_all=False)))
    return rouge_like(prediction, reference)


METRIC = {"rouge": rouge_like, "rouge_zh": rouge_zh_like}


def scorer_like(metric, prediction, reference):
    score = 0.0
    score = max(score, METRIC[metric](prediction, reference, all_classes=None))
    return score


cases = json.load(sys.stdin)
results = []
for metric, prediction, reference in cases:
    results.append(scorer_like(metric, prediction, reference))
print(json.dumps(results))
