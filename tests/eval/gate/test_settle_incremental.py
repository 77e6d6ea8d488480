"""The stop check kept between looks (eval/gate/settle.IncrementalCheck, what `lbeval ab --stop-when-settled`
uses: per-record results kept in an eval/analyze/memo.ScoreMemo, only the new inputs' records scored) decides
exactly as the from-scratch check (scratch_check: both whole runs re-read and re-scored at every look), on seeded
sessions: at every look, the two settlements are equal. The sessions are made so that each rule that settles
early does so during the session (timing, warm_repeat_equality, cause_rows, cache_isolation); the sessions that
are not stopped run every look to the last input, so the looks after the settling one are compared too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from eval.gate.policy import parse_policy
from eval.gate.settle import IncrementalCheck, scratch_check, stop_check
from eval.records.stop import OPEN, SETTLED_FAIL, Settlement, read_stop
from eval.run.ab import AbConfig, StopQuery, execute_ab
from eval.run.config import endpoints
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault, PrefixEffect

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


def _looks(policy_text: str) -> tuple[list[tuple[Settlement, Settlement]], Callable[[StopQuery], Settlement]]:
    policy = parse_policy(policy_text, "policy.toml")
    incremental, scratch = stop_check(policy), scratch_check(policy)
    assert isinstance(incremental, IncrementalCheck)
    looks: list[tuple[Settlement, Settlement]] = []

    def both(query: StopQuery) -> Settlement:
        looks.append((incremental(query), scratch(query)))
        return looks[-1][0]

    return looks, both


def _assert_equal(looks: list[tuple[Settlement, Settlement]]) -> None:
    for k, (inc, ref) in enumerate(looks, start=1):
        assert inc == ref, f"look {k}: {inc.reason} != {ref.reason}"


def test_incremental_decisions_equal_the_from_scratch_ones_at_every_look(tmp_path: Path) -> None:
    looks, both = _looks(POLICY)
    rows = [make_row(i, words=40 + 3 * i) for i in range(N)]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    with FakeServer() as a, FakeServer(block_size=8) as b:
        b.slowdown = 2.0
        # a warm/repeat mismatch and a retried 5xx on the variant: the count rules move during the session
        b.add_fault(Fault("5xx", match="Example ex4:", times=1))
        b.add_fault(Fault("divergence", match="Example ex7:", salt_seen=2, position=0))
        passes = ("cold", "warm", "repeat", "timing")
        ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=passes)
        cb = replace(ca, variant="var", topology=endpoints(b.base_url))
        da, _ = execute_ab(AbConfig(ca, cb, seed=3, quiet=True, stop_check=both))
    assert len(looks) >= 10  # the CS needs 10 inputs: every look before it was OPEN
    _assert_equal(looks)
    decisions = [inc.decision for inc, _ in looks]
    assert decisions[0] == OPEN and decisions[-1] == SETTLED_FAIL
    stop = read_stop(da)
    assert stop is not None and stop.inputs_run == len(looks) < N
    # the timing rule settled it, on its confidence sequence
    timing = next(r for r in looks[-1][0].rules if r.rule == "warm_prefill_change")
    assert timing.state == SETTLED_FAIL and timing.how == "cs"


REPEAT = """schema_version = 1
[rules.warm_repeat_equality]
enabled = true
min_fraction = 0.8
"""
CAUSES = """schema_version = 1
[rules.cause_rows]
enabled = true
[rules.cache_isolation]
enabled = true
"""


def _session(
    tmp_path: Path, both: Callable[[StopQuery], Settlement], variant: FakeServer, **kw: object
) -> None:
    """A session of N inputs whose stop check never stops it (the incremental settlement is returned as not
    settled): every look, before and after a rule settles, is compared."""

    def never_stop(query: StopQuery) -> Settlement:
        return replace(both(query), settled=False)

    rows = [make_row(i, words=40 + 3 * i) for i in range(N)]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    with FakeServer() as a:
        ca = config_for(a, inputs, tmp_path / "runs", variant="base", **kw)
        cb = replace(ca, variant="var", topology=endpoints(variant.base_url))
        execute_ab(AbConfig(ca, cb, seed=3, quiet=True, stop_check=never_stop))


def _first_settled(looks: list[tuple[Settlement, Settlement]], rule: str) -> int:
    states = [next(r.state for r in inc.rules if r.rule == rule) for inc, _ in looks]
    return next((k for k, s in enumerate(states, start=1) if s == SETTLED_FAIL), 0)


def test_warm_repeat_equality_settles_fail_at_the_mismatch_that_leaves_too_few(tmp_path: Path) -> None:
    looks, both = _looks(REPEAT)
    with FakeServer() as b:
        for i in (2, 5, 8, 11):  # 4 mismatches: 12 of 16 equal < 0.8 x 16 once the 4th is counted
            b.add_fault(Fault("divergence", match=f"Example ex{i}:", salt_seen=2, position=0))
        _session(tmp_path, both, b, passes=("cold", "warm", "repeat"))
    assert len(looks) == N
    _assert_equal(looks)
    first = _first_settled(looks, "warm_repeat_equality")
    assert 4 <= first < N, first  # settled during the session, at the 4th mismatch at the earliest
    assert all(inc.decision == SETTLED_FAIL for inc, _ in looks[first - 1 :])


def test_cause_rows_settles_fail_during_the_session(tmp_path: Path) -> None:
    looks, both = _looks(CAUSES)
    scen = ScenarioSettings(scenarios=("cache", "hitlen"), hit_lengths=(17, 32))
    with FakeServer() as b:  # the variant's outputs change after a primed prefix of 32 tokens: the hitlen row
        b.prefix_effect = PrefixEffect(residue=0, position=1)
        _session(tmp_path, both, b, passes=("cold", "warm"), scenarios=scen)
    assert len(looks) == N
    _assert_equal(looks)
    first = _first_settled(looks, "cause_rows")
    assert 1 <= first < N, [inc.reason for inc, _ in looks]


def test_cache_isolation_settles_fail_during_the_session(tmp_path: Path) -> None:
    looks, both = _looks(CAUSES)
    with FakeServer() as b:

        def leaky(query: StopQuery) -> Settlement:
            # from the second input on, the variant's cache ignores the salt (after lbeval's probe found it
            # honoured): a timing_cold with a fresh salt finds the tokens its input's cold and warm cached
            b.honor_salt = False
            return both(query)

        _session(tmp_path, leaky, b, passes=("cold", "warm", "timing"))
    assert len(looks) == N
    _assert_equal(looks)
    first = _first_settled(looks, "cache_isolation")
    assert 2 <= first < N, [inc.reason for inc, _ in looks]
