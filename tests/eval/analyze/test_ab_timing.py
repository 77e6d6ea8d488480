"""Paired-in-time timing of an `lbeval ab` session (eval/analyze/ab_timing.py) in compare and the report, against
values computed here from the records and the pairing, with fake servers whose speed drifts during the session."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path

from eval.analyze.ab_timing import paired_values, randomization_blocks, session_pairs
from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.gate.rules import NO_DATA, rule_warm_prefill_change
from eval.records.ab_pairs import last_pairs, read_pairs
from eval.records.run_folder import PAIRS_NAME, RECORDS_NAME, scan_records
from eval.report.tables import build_tables
from eval.report.write import write_reports
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault

GROWTH = 1.25  # both servers slow down by this factor after every pair (or every unit, sequentially)


def _config(a: FakeServer, b: FakeServer, tmp_path: Path) -> AbConfig:
    rows = [make_row(i, words=60 + 20 * i) for i in range(6)]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=("timing",), timing_reps=2)
    return AbConfig(ca, replace(ca, variant="var", topology=endpoints(b.base_url)), seed=11)


def _prefill_by_hand(da: Path, db: Path) -> tuple[list[str], list[float], list[float]]:
    """cold prefill (ms) of each adjacent timing pair, read straight from the records by the pair's seqs."""
    recs = {d: {r.seq: r for r in scan_records(d / RECORDS_NAME).records} for d in (da, db)}
    ids, a, b = [], [], []
    for p in last_pairs(read_pairs(da)).values():
        if not p.adjacent:
            continue
        ra = next(recs[da][s] for s in p.a.seqs if recs[da][s].pass_name == "timing_cold")
        rb = next(recs[db][s] for s in p.b.seqs if recs[db][s].pass_name == "timing_cold")
        ids.append(p.example_id)
        a.append(1000.0 * (ra.server_metrics or {})["prefill_time_s"])
        b.append(1000.0 * (rb.server_metrics or {})["prefill_time_s"])
    return ids, a, b


def test_drifting_machine_paired_ci_covers_zero_sequential_does_not(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:

        def slow_down(side: str, _unit: tuple[int, str, int]) -> None:
            count[side] = count.get(side, 0) + 1
            if sum(count.values()) % 2 == 0:  # after each pair: the machine gets slower for both
                a.slowdown *= GROWTH
                b.slowdown *= GROWTH

        count: dict[str, int] = {}
        config = _config(a, b, tmp_path)
        da, db = execute_ab(config, between=slow_down)

        # the same drift with sequential runs: all of base, then all of variant
        a.slowdown = b.slowdown = 1.0

        def grow(rec: object) -> None:
            if getattr(rec, "pass_name", "") == "timing_warm":
                a.slowdown *= GROWTH
                b.slowdown *= GROWTH

        sa = execute_run(replace(config.a, run_id="seq"), on_record=grow)
        sb = execute_run(replace(config.b, run_id="seq"), on_record=grow)

    c = compare(score_run(da), score_run(db))
    assert c.execution == "interleaved" and c.paired is not None
    pm = c.paired.measures["cold_prefill_ms"]
    assert pm.paired is not None and pm.sequential_style is not None and pm.drift is not None
    # independently: the geometric mean of the per-pair ratios, the medians' ratio, the pairs counted
    ids, va, vb = _prefill_by_hand(da, db)
    assert pm.n_pairs == len(ids) == 12 and pm.left_out == 0
    mean_log = statistics.fmean(math.log(y / x) for x, y in zip(va, vb, strict=True))
    assert math.isclose(pm.paired.estimate, 100 * math.expm1(mean_log), abs_tol=1e-9)
    assert math.isclose(
        pm.sequential_style.estimate, 100 * (statistics.median(vb) / statistics.median(va) - 1), abs_tol=1e-9
    )
    assert pm.paired.ci_low <= 0.0 <= pm.paired.ci_high and abs(pm.paired.estimate) < 1.0
    median_log = statistics.median(math.log(y / x) for x, y in zip(va, vb, strict=True))
    assert pm.paired_median is not None and pm.paired_median.statistic == "median"
    assert math.isclose(pm.paired_median.estimate, 100 * math.expm1(median_log), abs_tol=1e-9)
    # compared the other way round, the pairs are turned round too (side a is always the base given)
    back = compare(score_run(db), score_run(da))
    assert back.paired is not None and back.execution == "interleaved"
    assert back.paired.measures["cold_prefill_ms"].n_pairs == 12
    pm_back = back.paired.measures["cold_prefill_ms"].paired
    assert pm_back is not None and math.isclose(pm_back.estimate, 100 * math.expm1(-mean_log), abs_tol=1e-9)
    assert c.timing_changes["cold_prefill_ms"] is not None
    # compare's (and the gate's) figure is the gated one: the 20 % trimmed mean of the per-input mean log
    # ratios (6 inputs: one cut at each end), by hand
    per_input: dict[str, list[float]] = {}
    for i, x, y in zip(ids, va, vb, strict=True):
        per_input.setdefault(i, []).append(math.log(y / x))
    means = sorted(statistics.fmean(v) for v in per_input.values())
    assert pm.gated is not None and pm.gated.method == "yuen_t"
    assert math.isclose(pm.gated.estimate, 100 * math.expm1(statistics.fmean(means[1:-1])), abs_tol=1e-9)
    assert c.timing_changes["cold_prefill_ms"].estimate == pm.gated.estimate
    assert c.timing_changes["cold_prefill_ms"].high == pm.gated.ci_high
    # each server's own times drift (the machine), the paired ratio does not; the session is flagged
    assert (
        pm.drift.a.verdict == "drift"
        and pm.drift.b.verdict == "drift"
        and pm.drift.paired.verdict == "no_drift"
    )
    assert "pairing cancels it" in pm.reading
    assert any("timing drift in cold_prefill_ms" in w for w in c.warnings)
    assert not any("overlapped in time" in w for w in c.warnings)
    tables = {t.id: t for t in build_tables(c)}
    assert (
        "Interleaved A/B" in tables["timing"].reading and "free of machine drift" in tables["timing"].reading
    )
    assert "paired_timing" in tables and "drift flagged" in tables["paired_timing"].reading
    note = tables["paired_timing"].note
    # each measure's reading is its own sentence (they ran together: "... no drift seen warm TTFT, client: ...")
    for key, label in (
        ("cold_prefill_ms", "cold prefill, server"),
        ("warm_prefill_ms", "warm prefill, server"),
    ):
        reading = c.paired.measures[key].reading
        assert reading and f"{label}: {reading}." in note
    md, summary, html = write_reports(c, tmp_path / "report")
    assert "Interleaved A/B timing" in md.read_text() and "Interleaved A/B timing" in html.read_text()
    assert "paired_timing" in summary.read_text()

    seq = compare(score_run(sa), score_run(sb))
    ch = seq.timing_changes["cold_prefill_ms"]
    assert seq.execution == "sequential" and seq.paired is None and ch is not None
    assert ch.low > 0.0  # the sequential figure's CI excludes 0: drift taken for a regression


def test_incomplete_pairs_are_left_out_and_counted(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:
        b.add_fault(Fault("5xx", match="Example ex2:", times=-1))
        da, db = execute_ab(_config(a, b, tmp_path))
    c = compare(score_run(da), score_run(db))
    assert c.paired is not None and c.paired.incomplete == 2 and c.paired.pairs == 12
    assert c.paired.measures["cold_prefill_ms"].n_pairs == 10
    assert c.paired.measures["cold_prefill_ms"].left_out == 2
    assert any("2 of 12 pairs incomplete" in w for w in c.warnings)
    # a kill between the two appends of a pair line: one line more in base's file, still one session
    pairs_b = db / PAIRS_NAME
    pairs_b.write_text("".join(pairs_b.read_text().splitlines(keepends=True)[:-1]))
    again = compare(score_run(da), score_run(db))
    assert again.paired is not None and again.paired.pairs == 12
    pairs_b.write_text(
        "".join(pairs_b.read_text().splitlines(keepends=True)[:-1])
    )  # two lines apart: not one
    assert compare(score_run(da), score_run(db)).paired is None


def test_paired_drift_flags_the_session_and_the_timing_rule_gives_no_verdict(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:
        calls: list[str] = []

        def variant_slows(side: str, _unit: tuple[int, str, int]) -> None:
            calls.append(side)
            if len(calls) % 2 == 0:  # after each pair only the variant gets slower: the change itself moves
                b.slowdown *= GROWTH

        da, db = execute_ab(_config(a, b, tmp_path), between=variant_slows)
    c = compare(score_run(da), score_run(db))
    assert c.paired is not None
    pm = c.paired.measures["warm_prefill_ms"]
    assert pm.drift is not None and pm.drift.paired.verdict == "drift" and pm.drift.a.verdict == "no_drift"
    assert "the change itself moved during the session" in pm.reading
    assert any("timing drift in warm_prefill_ms" in w for w in c.warnings)
    result = rule_warm_prefill_change(c, {"max_change_pct": 5.0})
    assert result.status == NO_DATA and "drifted during the interleaved session" in result.measured


def test_randomization_blocks_follow_the_drawn_abba_order(tmp_path: Path) -> None:
    """Each timing pair's block is its input's pairs 2k and 2k + 1 in plan order: with the main unit first, timing
    repetition r is the input's pair r + 1 (block (r + 1) // 2); timing alone, block r // 2. Checked against that
    arithmetic and against the recorded orders: the two pairs of a block are AB and BA."""
    for passes, shift in ((("cold", "warm", "timing"), 1), (("timing",), 0)):
        out = tmp_path / "+".join(passes)
        with FakeServer() as a, FakeServer() as b:
            rows = [make_row(i, words=60 + 20 * i) for i in range(3)]
            inputs = write_rows(out / "inputs.jsonl", rows)
            ca = config_for(a, inputs, out / "runs", variant="base", passes=passes, timing_reps=5)
            da, db = execute_ab(
                AbConfig(ca, replace(ca, variant="var", topology=endpoints(b.base_url)), seed=3)
            )
        ra, rb = score_run(da), score_run(db)
        pairs = session_pairs(ra, rb)
        assert pairs is not None
        v = paired_values(ra, rb, pairs, "warm_prefill_ms")
        timing = [p for p in pairs if p.kind == "timing"]
        assert len(v.blocks) == len(v.a) == len(timing) == 15
        expected = [f"{p.dataset}/{p.example_id}#{(p.repetition + shift) // 2}" for p in timing]
        assert v.blocks == expected
        block_of = randomization_blocks(pairs)
        orders: dict[str, list[str]] = {}
        for p in pairs:
            orders.setdefault(block_of[p.unit], []).append(p.order)
        assert all(sorted(o) == ["AB", "BA"] for o in orders.values() if len(o) == 2)
        # main + 5 timing: 6 pairs per input, 3 full blocks; timing alone: 5, the last block of one pair
        assert sum(len(o) == 1 for o in orders.values()) == (0 if shift else 3)
