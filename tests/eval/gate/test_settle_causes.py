"""Early settlers of the cause rules (an A/B stops early only when every enabled rule is settled):
cause_rows settles FAIL when the variant's extra differing pairs on a row exceed what the base's remaining
inputs could still lose; cache_isolation settles FAIL at the first leak; neither settles PASS before the last
input. The looks are `settle(c, policy, k, n)` on runs of k inputs, told that n are planned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.analyze.causes import cause_rows
from eval.analyze.compare import compare
from eval.analyze.score import ScoredRun, score_run
from eval.gate.policy import parse_policy
from eval.gate.settle import remaining_pairs, settle
from eval.records.stop import OPEN, SETTLED_FAIL, SETTLED_PASS
from tests.eval.gate.test_cause_rows import SCEN, make_run
from tests.support.fake_server import PrefixEffect

CAUSES = parse_policy("schema_version = 1\n[rules.cause_rows]\n[rules.cache_isolation]\n", "causes.toml")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScoredRun]:
    """2 inputs each: a clean base, a clean second run, and a partial-prefix fault (outputs change after a primed
    prefix of 32 tokens only: the hitlen_L_32 row differs on both inputs, 2 of 2 pairs)."""
    tmp = tmp_path_factory.mktemp("settle-causes")
    return {
        "base": make_run(tmp, "base", SCEN, {}),
        "clean": make_run(tmp, "clean", SCEN, {}),
        "partial": make_run(tmp, "partial", SCEN, {"prefix_effect": PrefixEffect(residue=0, position=1)}),
    }


def _rule(base: ScoredRun, variant: ScoredRun, k: int, n: int, rule: str) -> tuple[str, str]:
    s = settle(compare(base, variant), CAUSES, k, n)
    r = next(x for x in s.rules if x.rule == rule)
    return r.state, r.detail


def test_a_partial_prefix_fault_settles_fail_when_the_base_cannot_catch_up(
    runs: dict[str, ScoredRun],
) -> None:
    # hitlen_L_32: variant 0/2 tokens equal, base 2/2; the row plans at most 1 pair per input (2 over 2 inputs,
    # rounded up), so with 1 input left the base could lose 1 more: 2 > 1, settled
    state, detail = _rule(runs["base"], runs["partial"], 2, 3, "cause_rows")
    assert state == SETTLED_FAIL, detail
    assert "base's remaining inputs plan at most 1 more pairs of this row: cannot catch up" in detail
    # with 2 inputs left the base could still lose 2: 2 > 2 is false, the rule stays open (undecided)
    state, detail = _rule(runs["base"], runs["partial"], 2, 4, "cause_rows")
    assert state == OPEN, detail


def test_clean_runs_settle_cause_rows_only_with_the_full_run(runs: dict[str, ScoredRun]) -> None:
    assert _rule(runs["base"], runs["clean"], 2, 3, "cause_rows")[0] == OPEN
    assert _rule(runs["base"], runs["clean"], 2, 2, "cause_rows")[0] == SETTLED_PASS
    assert _rule(runs["base"], runs["clean"], 2, 3, "cache_isolation")[0] == OPEN
    assert _rule(runs["base"], runs["clean"], 2, 2, "cache_isolation")[0] == SETTLED_PASS


def test_remaining_pairs_bound(runs: dict[str, ScoredRun]) -> None:
    rows = [r for r in cause_rows(compare(runs["base"], runs["clean"])) if r.both]
    by_key = {r.key: r for r in rows}
    # per input: cache rows 1 pair; hitlen two lengths (17, 32) -> 2 pairs per input, at least classes + 1 = 3
    assert remaining_pairs(by_key["cache_cold_warm"], rows, 2, 5) == 5
    assert remaining_pairs(by_key["hitlen_L_32"], rows, 2, 5) == 5
    assert remaining_pairs(by_key["hitlen"], rows, 2, 5) == 3 * 5


def test_a_leak_settles_cache_isolation_fail_at_once(runs: dict[str, ScoredRun], tmp_path: Path) -> None:
    variant = runs["clean"]
    records = Path(variant.loaded.run_dir) / "records.jsonl"
    original = records.read_text()
    lines = original.splitlines(keepends=True)
    for i, line in enumerate(lines):  # the first cold request of an input, sent with a fresh salt, finds 48
        obj = json.loads(line)
        if obj["pass_name"] == "cold" and obj["example_id"] == "ex1":
            obj["usage"]["cached_tokens"] = 48
            lines[i] = json.dumps(obj) + "\n"
    try:
        records.write_text("".join(lines))
        state, detail = _rule(runs["base"], score_run(Path(variant.loaded.run_dir)), 2, 40, "cache_isolation")
    finally:
        records.write_text(original)
    assert state == SETTLED_FAIL, detail
    assert "cache_salt accepted but not honoured" in detail and "after 2 of 40 inputs" in detail
