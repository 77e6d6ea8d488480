"""bench/bench_coverage.py's seed offset: offset 0 is the seeds the timing method was chosen on; FRESH_OFFSET
draws only sessions that selection never saw (the replication of docs/measured/coverage-fresh-seeds-*.md)."""

from __future__ import annotations

import pytest

from bench import bench_coverage as cov


def selection_seeds(sessions: int = cov.SESSIONS) -> set[int]:
    cells = {cov.cell_seed(n, r, k) for n in cov.INPUTS for r in cov.REPS for k in range(sessions)}
    power = {7_000_001 + 1009 * n + k for n in cov.POWER_INPUTS for k in range(sessions)}
    return cells | power


def test_offset_0_is_the_seed_of_the_selection_run() -> None:
    # the formula the 2026-12-04 figures were drawn with, written out
    assert cov.cell_seed(6, 2, 0) == 1_000_003 * 6 + 10_007 * 2
    assert cov.cell_seed(32, 5, 499) == 1_000_003 * 32 + 10_007 * 5 + 499


def test_fresh_seeds_never_meet_a_seed_of_the_selection() -> None:
    chosen = selection_seeds()
    fresh = {cov.FRESH_OFFSET + s for s in chosen}
    assert len(fresh) == len(chosen) and not fresh & chosen
    assert max(chosen) < cov.FRESH_OFFSET


def test_the_offset_changes_a_cells_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LBEVAL_COVERAGE_METHODS", cov.CHOSEN)
    monkeypatch.setenv("LBEVAL_COVERAGE_SEED_OFFSET", str(cov.FRESH_OFFSET))
    assert cov.seed_offset() == cov.FRESH_OFFSET
    same = cov.run_cell(6, 2, "load", 30, 50)[0]
    again = cov.run_cell(6, 2, "load", 30, 50, 0)[0]
    fresh = cov.run_cell(6, 2, "load", 30, 50, cov.FRESH_OFFSET)[0]
    assert same == again  # the default is offset 0 whatever the environment: main() passes seed_offset()
    assert fresh.median_half_width_pct != same.median_half_width_pct
