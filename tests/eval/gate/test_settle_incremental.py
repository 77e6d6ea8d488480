"""The stop check kept between looks (eval/gate/settle.IncrementalCheck, what `lbeval ab --stop-when-settled`
uses) decides exactly as the from-scratch check (scratch_check: both whole runs re-read and re-scored at every
look), on a seeded session: at every look of the session, the two settlements are equal."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from eval.gate.policy import parse_policy
from eval.gate.settle import IncrementalCheck, scratch_check, stop_check
from eval.records.stop import OPEN, SETTLED_FAIL, Settlement, read_stop
from eval.run.ab import AbConfig, StopQuery, execute_ab
from eval.serve.fake_server import FakeServer, Fault
from tests.eval.fake_fixtures import config_for, make_row, write_rows

POLICY = """schema_version = 1
[rules.no_errors]
enabled = true
max = 1
[rules.warm_repeat_equality]
enabled = true
min_fraction = 0.5
[rules.warm_prefill_change]
enabled = true
max_change_pct = 5.0
"""
N = 16


def test_incremental_decisions_equal_the_from_scratch_ones_at_every_look(tmp_path: Path) -> None:
    policy = parse_policy(POLICY, "policy.toml")
    incremental, scratch = stop_check(policy), scratch_check(policy)
    assert isinstance(incremental, IncrementalCheck)
    looks: list[tuple[Settlement, Settlement]] = []

    def both(query: StopQuery) -> Settlement:
        looks.append((incremental(query), scratch(query)))
        return looks[-1][0]

    rows = [make_row(i, words=40 + 3 * i) for i in range(N)]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    with FakeServer() as a, FakeServer(block_size=8) as b:
        b.slowdown = 2.0
        # a warm/repeat mismatch and a retried 5xx on the variant: the count rules move during the session
        b.add_fault(Fault("5xx", match="Example ex4:", times=1))
        b.add_fault(Fault("divergence", match="Example ex7:", salt_seen=2, position=0))
        passes = ("cold", "warm", "repeat", "timing")
        ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=passes)
        cb = replace(ca, variant="var", base_url=b.base_url)
        da, _ = execute_ab(AbConfig(ca, cb, seed=3, quiet=True, stop_check=both))
    assert len(looks) >= 10  # the CS needs 10 inputs: every look before it was OPEN
    for k, (inc, ref) in enumerate(looks, start=1):
        assert inc == ref, f"look {k}: {inc.reason} != {ref.reason}"
    decisions = [inc.decision for inc, _ in looks]
    assert decisions[0] == OPEN and decisions[-1] == SETTLED_FAIL
    stop = read_stop(da)
    assert stop is not None and stop.inputs_run == len(looks) < N
