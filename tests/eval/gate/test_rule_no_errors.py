"""The no_errors rule (eval/gate/ruleset/no_errors.py) on its own: errored requests per listed run, at most
`max`; settled FAIL at the first count over max, PASS only after the last input."""

from __future__ import annotations

from pathlib import Path

from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.gate.registry import rule
from eval.gate.rule import FAIL, PASS, Look, RowRef
from eval.records.stop import OPEN, SETTLED_FAIL, SETTLED_PASS
from tests.eval.runfactory import base_and_variant, write_run


def test_no_errors_counts_each_listed_run_and_settles_fail_at_the_first_error(tmp_path: Path) -> None:
    no_errors = rule("no_errors")
    assert no_errors is not None and no_errors.settle is not None
    base, variant = base_and_variant(tmp_path, errors={("qas01", "control_salt", 0)})
    c = compare(
        score_run(write_run(tmp_path / "runs", base)), score_run(write_run(tmp_path / "runs", variant))
    )
    both = no_errors.judge(c, {"max": 0, "runs": ["base", "variant"]})
    assert (both.status, both.measured, both.threshold) == (
        FAIL,
        "errored requests: base 0, variant 1",
        "<= 0 per run",
    )
    assert both.rows == (RowRef("cache", "errors", True),)
    assert no_errors.judge(c, {"max": 1, "runs": ["base", "variant"]}).status == PASS
    assert no_errors.judge(c, {"max": 0, "runs": ["base"]}).status == PASS
    early = no_errors.settle(Look(c, 3, 6, {}), {"max": 0, "runs": ["base", "variant"]})
    assert (early.state, early.detail) == (SETTLED_FAIL, "base 0, variant 1 after 3 of 6 inputs: over max 0")
    base_only = {"max": 0, "runs": ["base"]}
    assert no_errors.settle(Look(c, 3, 6, {}), base_only).state == OPEN  # the next input could error
    assert no_errors.settle(Look(c, 6, 6, {}), base_only).state == SETTLED_PASS
