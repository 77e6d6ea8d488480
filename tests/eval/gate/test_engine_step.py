"""The engine's own step in the cause_rows limit: a bf16 server (the hybrid, 0.0157 a step) runs a batch row
alike in one run (delta 0) and one step apart in the next; the base shows that step on another row (a partial
hit), so the variant's batch row one step apart is within the engine's noise, and a numerics fault is not.
Measured on the real cpu-hybrid: base batch rows 0, base hitlen rows 0.0157-0.0158, a second clean run's batch
rows 0.0156 (docs/measured/faults-matrix-2026-12-07.md)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from eval.gate.cross_numerics import engine_step
from eval.gate.rule import FAIL, PASS
from eval.gate.ruleset.cause_rows import engine_noise, rule_cause_rows
from tests.eval.gate.test_cross_numerics import attribution, row, stats

POLICY = {"allowed_drop": 0, "delta_factor": 10.0, "delta_floor": 0.01, "skip_one_sided": False}


@pytest.mark.parametrize(
    ("deltas", "want"),
    [
        ({"batch": 0.0, "hitlen_middle": 0.0157, "hitlen_1B": 0.0158}, (0.0157, "hitlen_middle")),
        ({"batch": 3e-5, "hitlen_1B": 2e-5}, (2e-5, "hitlen_1B")),  # dense fp32 kernel noise
        ({"batch": 0.0, "hitlen_1B": 0.0}, (0.0, None)),  # no row moved: no step seen
        ({"batch": None}, (0.0, None)),  # no pair compared
    ],
)
def test_the_step_is_the_smallest_change_the_base_showed(
    deltas: dict[str, float | None], want: tuple[float, str | None]
) -> None:
    rows = [row(k, k.split("_")[0], stats(2, 2, d)) for k, d in deltas.items()]
    rows.append(row("cache_cold_warm", "cache", stats(2, 2, 0.9), measured=False))  # not measured: not read
    assert engine_step(attribution(rows)) == want
    assert engine_step(None) == (0.0, None)


def comparison(base: dict[str, float], variant: dict[str, float]) -> Any:
    def run(deltas: dict[str, float]) -> Any:
        rows = [row(k, k.split("_")[0], stats(2, 2, d)) for k, d in deltas.items()]
        return SimpleNamespace(scores=SimpleNamespace(attribution=attribution(rows)))

    return SimpleNamespace(base=run(base), variant=run(variant))


BASE = {"batch": 0.0, "batch_b2": 0.0, "hitlen_middle": 0.0157, "repeats": 0.0}


def test_a_bf16_batch_row_one_step_apart_is_the_engines_noise() -> None:
    c = comparison(BASE, {**BASE, "batch": 0.0156, "batch_b2": 0.0156})
    assert engine_noise(c) == (0.0157, "hitlen_middle")
    got = rule_cause_rows(c, POLICY)
    assert got.status == PASS, got.detail
    assert "the base's own noise 0.0157 (hitlen_middle) x 10" in got.threshold


def test_a_numerics_fault_on_the_batch_row_still_fails() -> None:
    got = rule_cause_rows(comparison(BASE, {**BASE, "batch": 0.9}), POLICY)  # a numerics fault: 0.9
    assert got.status == FAIL and got.measured.endswith("1 worse than the base: batch"), got.measured


def test_without_a_step_in_the_base_the_floor_rules() -> None:
    dense = {"batch": 0.0, "hitlen_middle": 0.0}  # nothing moved in the base: the 0.01 floor is the limit
    got = rule_cause_rows(comparison(dense, {**dense, "batch": 0.0156}), POLICY)
    assert got.status == FAIL and "limit 0.01" in got.detail, got.detail


def test_the_benign_noise_wins_when_larger() -> None:
    c = comparison({**BASE, "batch": 0.03}, {**BASE, "batch": 0.03})
    assert engine_noise(c) == (0.03, "batch")
