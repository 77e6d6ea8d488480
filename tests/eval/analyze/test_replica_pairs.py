"""The replica-pair floor of an A/A session on replicas (eval/analyze/replica_pairs.py, eval/report/replica_pairs.py):
`lbeval ab X X` on 2 replicas per side, replica pair 0 one fake server as both sides (nothing
can differ), replica pair 1 two fakes of which B's adds 1e-3 to every logprob and diverges at output position 2
for the inputs' prompts (fake server faults). Expected, from the faults alone: pair 0 all outputs equal with max
delta 0, pair 1 no output equal and a max delta of at least 1e-3; both pairs with a warm-prefill interval; the
report's table and summary.json say so per pair; a one-replica session has no such table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.report.json_out import summary_json
from eval.report.tables import build_tables
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault

ROWS = [make_row(i, words=40 + 10 * i) for i in range(6)]
JITTER = 1e-3


@pytest.fixture(name="fakes")
def fakes_fixture() -> Iterator[list[FakeServer]]:
    with ExitStack() as stack:
        yield [stack.enter_context(FakeServer()) for _ in range(3)]


def aa_session(fakes: list[FakeServer], tmp_path: Path, urls_a: list[str], urls_b: list[str]) -> AbConfig:
    inputs = write_rows(tmp_path / "inputs.jsonl", ROWS)
    ca = config_for(fakes[0], inputs, tmp_path / "runs", variant="same", passes=("cold", "warm", "timing"))
    a = replace(ca, topology=endpoints(*urls_a))
    b = replace(ca, topology=endpoints(*urls_b))
    return AbConfig(a, b, seed=5)


def test_the_aa_floor_per_replica_pair_shows_the_pair_that_differs(
    fakes: list[FakeServer], tmp_path: Path
) -> None:
    same, a1, b1 = fakes
    b1.add_fault(Fault("jitter", match="Question:", times=-1, amount=JITTER))
    b1.add_fault(Fault("divergence", match="Question:", times=-1, position=2))
    config = aa_session(fakes, tmp_path, [same.base_url, a1.base_url], [same.base_url, b1.base_url])
    da, db = execute_ab(config)
    c = compare(score_run(da), score_run(db))
    assert c.replica_pairs is not None and c.replica_pairs.across == 0
    p0, p1 = c.replica_pairs.pairs
    assert (p0.replica, p1.replica) == (0, 1) and max(p0.inputs, p1.inputs) <= len(ROWS)
    # main + 2 timing units per input, all adjacent, each on one replica pair (a timing unit need not be on its
    # input's); cold and warm compared once per input, on its main unit's replica pair
    assert p0.pairs + p1.pairs == 3 * len(ROWS)
    assert p0.agreement.n_total + p1.agreement.n_total == 2 * len(ROWS)
    assert p0.agreement.tokens_equal == p0.agreement.n_total and p0.agreement.max_delta == 0.0
    assert p1.agreement.tokens_equal == 0 and p1.agreement.text_equal == 0
    assert p1.agreement.max_delta is not None and p1.agreement.max_delta >= JITTER * 0.99
    assert all(d.position == 2 for d in p1.agreement.divergences)
    for rp in (p0, p1):  # timing ran: each pair's gated interval and its floor
        t = rp.timing["warm_ttft_ms"]
        assert t is not None and 2 <= t.n_inputs <= rp.inputs
        assert rp.floor("warm_ttft_ms") == max(abs(t.ci_low), abs(t.ci_high))

    tables = build_tables(c)
    table = next(t for t in tables if t.id == "replica_pairs")
    assert "A/A of the replica layout" in table.reading and "replica pair(s) 1 differ" in table.reading
    summary = summary_json(c, tables)
    rows = {r["key"]: r["cells"] for r in summary["tables"]["replica_pairs"]["rows"]}
    assert set(rows) == {"replica_0", "replica_1"}
    assert rows["replica_0"]["tokens equal"] == rows["replica_0"]["text equal"]
    raw = summary["replica_pairs"]
    assert [r["replica"] for r in raw] == [0, 1]
    assert raw[0]["agreement"]["max_delta"] == 0.0 and raw[1]["agreement"]["tokens_equal"] == 0
    assert raw[1]["floor_pct"]["warm_ttft_ms"] == p1.floor("warm_ttft_ms")


def test_a_one_replica_session_has_no_replica_pairs(fakes: list[FakeServer], tmp_path: Path) -> None:
    da, db = execute_ab(aa_session(fakes, tmp_path, [fakes[0].base_url], [fakes[0].base_url]))
    c = compare(score_run(da), score_run(db))
    assert c.replica_pairs is None
    assert all(t.id != "replica_pairs" for t in build_tables(c))
    assert summary_json(c, build_tables(c))["replica_pairs"] is None
