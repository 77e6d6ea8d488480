"""The timing headline (the timing table's reading, also the terminal summary's timing line) says how the
runs were executed and never claims a change that machine drift between sequential runs could explain.

runfactory: base warm prefill 75.5 ms on average, variant 60.5 ms: (60.5 - 75.5) / 75.5 = -19.9%; the base
starts at 10:00, the variant at 10:30.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from eval.analyze.compare import Comparison, compare
from eval.analyze.score import score_run
from eval.report.console import compare_summary
from eval.report.tables import build_tables
from eval.report.timing_table import timing_reading
from tests.eval.runfactory import base_and_variant, write_run


def _compare(tmp_path: Path, **variant_kw: Any) -> Comparison:
    base, variant = base_and_variant(tmp_path, **variant_kw)
    runs = tmp_path / "runs"
    return compare(score_run(write_run(runs, base)), score_run(write_run(runs, variant)))


def test_sequential_runs_say_so_and_the_change_may_be_drift(tmp_path: Path) -> None:
    c = _compare(tmp_path)
    assert (c.execution, c.start_gap_s) == ("sequential", 1800.0)
    reading = timing_reading(c)
    assert reading.startswith("Base and variant ran one after the other (sequential, started 30 min apart): ")
    assert "the warm prefill (server) change below (-19.9%, 95% CI " in reading
    assert reading.endswith(
        "over 6 inputs) may be machine drift, not the variant; an interleaved A/B run is needed to attribute it."
    )
    assert "lower than base" not in reading  # no claim


def test_sequential_runs_without_a_detectable_change(tmp_path: Path) -> None:
    same = {"prefill_s": {"timing_cold": 0.200, "timing_warm": 0.050}, "prefill_step_s": 0.010}
    c = _compare(tmp_path, started_at="2026-09-09T10:20:30Z", ended_at="2026-09-09T10:40:00Z", **same)
    assert timing_reading(c) == (
        "Base and variant ran one after the other (sequential, started 20 min apart): no detectable change in "
        "warm prefill (server) (+0.0%, 95% CI +0.0% to +0.0%, over 6 inputs, includes 0); drift is not in the "
        "interval."
    )


def test_overlapping_runs_make_the_change_invalid(tmp_path: Path) -> None:
    c = _compare(tmp_path, started_at="2026-09-09T10:10:00Z", ended_at="2026-09-09T10:30:00Z")
    assert c.execution == "overlapping"
    assert timing_reading(c).startswith(
        "Base and variant ran at the same time and competed for the machine: the warm prefill (server) change "
        "below (-19.9%"
    )
    assert "is not valid" in timing_reading(c)


def test_unknown_order(tmp_path: Path) -> None:
    c = _compare(tmp_path, started_at="")
    assert (c.execution, c.start_gap_s) == ("unknown", None)
    assert timing_reading(c).startswith("The runs' start and end times are unknown")
    assert "may be machine drift" in timing_reading(c)


def test_only_side_by_side_timings_attribute_the_change(tmp_path: Path) -> None:
    # an execution in which base and variant timings were taken side by side (the interleaved A/B run)
    c = replace(_compare(tmp_path), execution="interleaved")
    assert timing_reading(c).startswith("Variant warm prefill (server) is 19.9% lower than base (95% CI ")


def test_the_terminal_summary_carries_the_headline(tmp_path: Path) -> None:
    c = _compare(tmp_path)
    text = " ".join(" ".join(compare_summary(c, build_tables(c), None, [tmp_path / "r.html"])).split())
    assert " timing Base and variant ran one after the other (sequential, started 30 min apart): " in text
