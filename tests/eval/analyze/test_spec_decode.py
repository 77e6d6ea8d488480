"""Speculative decoding's figures of a run (eval/analyze/spec_decode.py) and their per-request deltas from
/metrics (eval/run/metrics_text.py): tables of cases, golden values summed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.analyze.spec_decode import SpecDecode, spec_decode
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.report.console import compare_summary
from eval.report.spec_decode_table import spec_decode_table
from eval.report.tables import build_tables
from eval.run.metrics_text import parse_metrics, request_deltas
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.eval.records.test_run_folder import make_record
from tests.support.fake_server import FakeServer


def spec(drafts: float, tokens: float, accepted: float, *pos: float) -> dict[str, float]:
    out = {"spec_drafts": drafts, "spec_draft_tokens": tokens, "spec_accepted": accepted}
    out.update({f"spec_accepted_pos{k}": v for k, v in enumerate(pos)})
    return out


CASES = [
    # (records as (status, figures or None, foreign), expected SpecDecode or None)
    ([("ok", None, False), ("ok", {"prefill_time_s": 0.1}, False)], None),
    (
        [("ok", spec(5, 15, 6, 4, 2, 0), False), ("ok", spec(3, 9, 3, 2, 1, 0), False)],
        SpecDecode(2, 0, 0, 8, 24, 9, (6, 3, 0)),
    ),
    (
        [("ok", spec(5, 15, 6, 4, 2, 0), False), ("ok", spec(9, 27, 27, 9, 9, 9), True), ("ok", None, False)],
        SpecDecode(1, 1, 1, 5, 15, 6, (4, 2, 0)),
    ),
    ([("error", spec(1, 3, 3, 1, 1, 1), False), ("invalid", spec(2, 6, 0, 0, 0, 0), False)],
     SpecDecode(1, 0, 0, 2, 6, 0, (0, 0, 0))),
]  # fmt: skip


@pytest.mark.parametrize(("recs", "want"), CASES)
def test_spec_decode_sums_own_figures(
    recs: list[tuple[str, dict[str, float] | None, bool]], want: object
) -> None:
    records = [
        make_record(
            seq=i, status=status, server_metrics=figures, server_foreign="another's" if foreign else None
        )
        for i, (status, figures, foreign) in enumerate(recs)
    ]
    assert spec_decode(records) == want


def test_rates() -> None:
    got = SpecDecode(2, 0, 0, 8, 24, 9, (6, 3, 0))
    assert got.acceptance_rate == pytest.approx(9 / 24)
    assert got.mean_acceptance_length == pytest.approx(1 + 9 / 8)
    assert got.position_rates == pytest.approx((6 / 8, 3 / 8, 0.0))
    empty = SpecDecode(0, 0, 3, 0, 0, 0, ())
    assert (
        empty.acceptance_rate is None and empty.mean_acceptance_length is None and empty.position_rates == ()
    )


METRICS = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {d}
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {t}
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {a}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {p0}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} {p1}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="2"}} {p2}
"""


def test_request_deltas_carry_the_speculative_counters() -> None:
    before = parse_metrics(METRICS.format(d=35, t=105, a=10, p0=7, p1=3, p2=0))
    after = parse_metrics(METRICS.format(d=40, t=120, a=16, p0=11, p1=4, p2=1))
    got = request_deltas(before, after)
    assert {k: v for k, v in got.items() if k.startswith("spec_")} == spec(5, 15, 6, 4, 1, 1)
    plain = parse_metrics('vllm:prefix_cache_queries_total{engine="0"} 5\n')
    assert not any(k.startswith("spec_") for k in request_deltas(plain, plain))


def test_a_run_against_a_drafting_server_reports_its_acceptance(tmp_path: Path) -> None:
    """End to end on the fake: its rule (c // 2 drafts of 3 tokens per request of c output tokens, position 0
    always accepted) summed by hand over the final records equals the run's figures, and the comparison's
    table and summary.json show them."""
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])
    with FakeServer() as server:
        server.spec_tokens = 3
        runs = [
            execute_run(config_for(server, inputs, tmp_path / "runs", variant=v, passes=("cold", "warm")))
            for v in ("a", "b")
        ]
    finals = list(select_final(load_run(runs[0]).records).final.values())
    drafts = sum(len(r.output_token_ids or []) // 2 for r in finals)
    assert drafts > 0
    got = score_run(runs[0]).scores.spec_decode
    assert got == SpecDecode(len(finals), 0, 0, drafts, 3 * drafts, drafts, (drafts, 0, 0))
    assert got.mean_acceptance_length == pytest.approx(2.0) and got.acceptance_rate == pytest.approx(1 / 3)
    table = spec_decode_table(compare(score_run(runs[0]), score_run(runs[1])))
    assert (
        table is not None and table.reading == "Speculative decoding: acceptance base 33.3%, variant 33.3%."
    )
    assert [r.key for r in table.rows] == ["base", "variant"]
    c = compare(score_run(runs[0]), score_run(runs[1]))
    lines = compare_summary(c, build_tables(c), None, [tmp_path / "report.md"])
    assert [line for line in lines if line.startswith("drafts")] == [
        "drafts     Speculative decoding: acceptance base 33.3%, variant 33.3%."
    ]


def test_no_table_without_a_draft(tmp_path: Path) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    with FakeServer() as server:
        run = execute_run(config_for(server, inputs, tmp_path / "runs", passes=("cold",)))
    scored = score_run(run)
    assert scored.scores.spec_decode is None and spec_decode_table(compare(scored, scored)) is None
