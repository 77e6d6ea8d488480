"""Attribution end to end on the fake server: each injected cause shows in its own rows and in no other.

Every run below asks for every scenario (cache, batch, hitlen, repeats, traffic) on the same three inputs, with
one fault knob of the fake server on (tests/support/fake_server.py). The expected rows are derived from the fault's
definition, never read from the code under test:
    batch_effect   a request that saw another in flight gets +JITTER on every logprob and new tokens from
                   FLIP_AT: every pair whose measured request was in a batch differs at FLIP_AT, with a max delta of
                   JITTER (float32); pairs of requests sent alone are identical
    prefix_effect  the output diverges from position 0 when the primed prefix L has L % 16 == 1, and the hit is
                   dropped to 0 when L == 32: the hitlen rows of those lengths, and only they
    stop_effect    the request after one that ended on a stop string diverges from position 1: in the traffic
                   scenario, traffic_warm (sent right after the stop-string noise)
    repeat_flips   the k-th generation of the same prompt IDs diverges from position 2: the repeats rows
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.attribution import (
    POINT_BATCH,
    POINT_HITLEN,
    POINT_NONE,
    POINT_TRAFFIC,
    Attribution,
    AttributionRow,
    pointed_cause,
)
from eval.analyze.score import ScoredRun, score_run
from eval.report.attribution import reading
from eval.run.runner import execute_run
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.batch_hook import announced_batches
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import BatchEffect, FakeServer, PrefixEffect, StopEffect

BLOCK = 16
WORDS = (40, 47, 55)  # prompt lengths: chat tokens = words + 19 (the fake's template and make_row's text)
N_INPUTS = len(WORDS)
HIT_LENGTHS = (15, 17, 32, 33)
REPEATS = 3
JITTER = 3e-5
FLIP_AT = 1
ALL = ("cache", "batch", "hitlen", "repeats", "traffic")
SCENARIOS = ScenarioSettings(scenarios=ALL, batch_sizes=(1, 3), repeats=REPEATS, hit_lengths=HIT_LENGTHS)

CAUSE_ROWS = ("cache_cold_warm", "cache_warm_repeat", "batch", "batch_warm", "hitlen", "repeats", "traffic")


def chat_tokens(words: int) -> int:
    return words + 19


def run_with(tmp_path: Path, name: str, knobs: dict[str, Any], **kw: Any) -> ScoredRun:
    inputs = write_rows(tmp_path / f"{name}.jsonl", [make_row(i, words=w) for i, w in enumerate(WORDS)])
    with FakeServer(block_size=BLOCK) as fake:
        for attr, value in knobs.items():
            setattr(fake, attr, value)
        config = config_for(fake, inputs, tmp_path / "runs", variant=name, passes=("cold", "warm", "repeat"))
        with announced_batches(fake):
            run_dir = execute_run(replace(config, scenarios=kw.pop("scenarios", SCENARIOS), **kw))
    scored = score_run(run_dir)
    assert scored.scores.run.complete
    return scored


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScoredRun]:
    tmp = tmp_path_factory.mktemp("attribution")
    window = BatchEffect(
        window_s=None, jitter=0.0
    )  # batches form on a count of arrivals (announced): every batch a batch, whatever the load
    return {
        "clean": run_with(tmp, "clean", {"batch_effect": window}),
        "batch": run_with(
            tmp, "batch", {"batch_effect": BatchEffect(window_s=None, jitter=JITTER, flip_at=FLIP_AT)}
        ),
        "hitlen": run_with(
            tmp, "hitlen", {"prefix_effect": PrefixEffect(modulus=16, residue=1, drop_hit_at=frozenset({32}))}
        ),
        "traffic": run_with(tmp, "traffic", {"stop_effect": StopEffect(position=1)}),
    }


def att(run: ScoredRun) -> Attribution:
    a = run.scores.attribution
    assert a is not None
    return a


def row(run: ScoredRun, key: str) -> AttributionRow:
    r = att(run).row(key)
    assert r is not None and r.measured and r.pairs is not None, key
    return r


def identical(r: AttributionRow) -> bool:
    s = r.pairs
    assert s is not None
    return s.n_total == s.n_pairs and s.text_equal == s.tokens_equal == s.n_total and s.max_delta == 0.0


def expected_pairs() -> dict[str, int]:
    """N of each cause row, from the plan: inputs x what each varies."""
    return {
        "cache_cold_warm": N_INPUTS,
        "cache_warm_repeat": N_INPUTS,
        "batch": N_INPUTS,  # one batch size above 1
        "batch_warm": N_INPUTS,
        "hitlen": N_INPUTS * len(HIT_LENGTHS),
        "repeats": N_INPUTS * ((REPEATS - 1) + REPEATS),  # alone r vs 0 (r >= 1), batched r vs alone 0
        "traffic": N_INPUTS,
    }


def test_a_clean_server_attributes_nothing(runs: dict[str, ScoredRun]) -> None:
    run = runs["clean"]
    for key, n in expected_pairs().items():
        r = row(run, key)
        assert r.pairs is not None and r.pairs.n_total == n, key
        assert identical(r), key
        assert r.outputs is not None and r.outputs.n_multiple == 0 and r.outputs.max_distinct == 1
    hits = row(run, "hitlen").hits
    assert hits is not None and (hits.honoured, hits.total) == (N_INPUTS * len(HIT_LENGTHS),) * 2
    assert row(run, "traffic").stop_ended == (N_INPUTS, N_INPUTS)  # the stop-string noise ended on it
    assert att(run).confounding is None  # concurrency 1


def test_batch_composition_shows_in_the_batch_rows_only(runs: dict[str, ScoredRun]) -> None:
    run = runs["batch"]
    for key in ("batch", "batch_b3", "batch_warm", "batch_warm_b3", "repeats_batched"):
        r = row(run, key)
        s = r.pairs
        assert s is not None and s.text_equal == s.tokens_equal == 0, key
        assert s.n_pairs == s.n_total and [d.position for d in s.divergences] == [FLIP_AT] * s.n_total, key
        assert s.max_delta is not None and abs(s.max_delta - JITTER) < 1e-6, key  # float32 rounding
    # requests sent alone (cache, hitlen, traffic, repeats alone) are untouched
    for key in ("cache_cold_warm", "cache_warm_repeat", "hitlen", "repeats_alone", "traffic"):
        assert identical(row(run, key)), key
    # the repeats cause row pools alone (equal) and batched (all differ) pairs
    s = row(run, "repeats").pairs
    assert s is not None and (s.text_equal, s.n_total) == (
        N_INPUTS * (REPEATS - 1),
        expected_pairs()["repeats"],
    )


def hit_lengths_diverging() -> set[int]:
    return {length for length in HIT_LENGTHS if length % 16 == 1}


def test_prefix_hit_length_shows_in_its_own_hitlen_rows_only(runs: dict[str, ScoredRun]) -> None:
    run = runs["hitlen"]
    for length in HIT_LENGTHS:
        r = row(run, f"hitlen_L_{length}")
        assert r.hit_lens == [length] * N_INPUTS
        s, hits = r.pairs, r.hits
        assert s is not None and hits is not None
        if length in hit_lengths_diverging():
            assert s.text_equal == 0 and [d.position for d in s.divergences] == [0] * N_INPUTS
        else:
            assert identical(r), length
        # the hit each length promises: floor(min(L, n-1)/16)*16; L == 32 had its hit dropped to 0
        assert hits.total == N_INPUTS
        assert hits.honoured == (0 if length == 32 else N_INPUTS), length
        for miss in hits.misses:
            assert (miss.hit_len, miss.cached, miss.expected) == (32, 0, 32)
    head = row(run, "hitlen")
    assert head.pairs is not None and head.pairs.text_equal == N_INPUTS * (len(HIT_LENGTHS) - 2)
    for key in ("cache_cold_warm", "cache_warm_repeat", "batch", "batch_warm", "repeats", "traffic"):
        assert identical(row(run, key)), key


def test_traffic_after_a_stop_string_shows_in_the_traffic_row_only(runs: dict[str, ScoredRun]) -> None:
    run = runs["traffic"]
    r = row(run, "traffic")
    assert r.pairs is not None and r.pairs.text_equal == 0
    assert [d.position for d in r.pairs.divergences] == [1] * N_INPUTS
    assert r.stop_ended == (N_INPUTS, N_INPUTS)
    vs_cold = row(run, "traffic_vs_cold")  # the traffic and the cache together: the same divergence
    assert vs_cold.pairs is not None and [d.position for d in vs_cold.pairs.divergences] == [1] * N_INPUTS
    for key in ("cache_cold_warm", "cache_warm_repeat", "batch", "batch_warm", "hitlen", "repeats"):
        assert identical(row(run, key)), key


def test_variation_between_repeats_shows_in_the_repeats_rows_only(tmp_path: Path) -> None:
    """Per input the cache scenario generates the prompt 3 times (cold, warm, repeat), then repeats_alone r is
    its (3 + r)-th generation and the batched ones follow: flipping generations 4 and 3 + REPEATS + 1 makes
    repeats_alone 1 differ from repeat 0, and one batched copy (which one depends on arrival order)."""
    flips = {3 + 1, 3 + REPEATS + 1}
    scenarios = ScenarioSettings(scenarios=("cache", "repeats"), repeats=REPEATS)
    run = run_with(
        tmp_path, "repeats", {"repeat_flips": flips, "repeat_flip_position": 2}, scenarios=scenarios
    )
    alone, batched = row(run, "repeats_alone"), row(run, "repeats_batched")
    assert alone.pairs is not None and batched.pairs is not None
    assert (alone.pairs.text_equal, alone.pairs.n_total) == (
        N_INPUTS * (REPEATS - 2),
        N_INPUTS * (REPEATS - 1),
    )
    assert (batched.pairs.text_equal, batched.pairs.n_total) == (N_INPUTS * (REPEATS - 1), N_INPUTS * REPEATS)
    assert [d.position for d in alone.pairs.divergences] == [2] * N_INPUTS
    for r in (alone, batched, row(run, "repeats")):
        o = r.outputs
        assert o is not None and (o.n_multiple, o.n_inputs, o.max_distinct) == (N_INPUTS, N_INPUTS, 2)
    o = alone.outputs
    assert o is not None and o.min_top_share == pytest.approx((REPEATS - 1) / REPEATS)
    assert o.split_positions == [2] * N_INPUTS
    for key in ("cache_cold_warm", "cache_warm_repeat"):
        assert identical(row(run, key)), key
    for key in ("batch", "batch_warm", "hitlen", "traffic"):  # not asked for: stated, not invented
        r = att(run).row(key)
        assert r is not None and not r.measured and r.pairs is None


def test_cache_pairs_at_concurrency_above_one_are_marked_confounded(tmp_path: Path) -> None:
    scenarios = ScenarioSettings(scenarios=("cache", "batch"), batch_sizes=(1, 2))
    confounded = run_with(tmp_path, "conc", {"batch_effect": BatchEffect(window_s=None, jitter=JITTER)},
                          scenarios=scenarios, concurrency=2)  # fmt: skip
    a = att(confounded)
    assert row(confounded, "cache_cold_warm").confounded_with == "batch composition"
    assert row(confounded, "cache_warm_repeat").confounded_with == "batch composition"
    assert (
        a.confounding is not None and a.confounding.concurrency == 2 and a.confounding.measured_sizes == [2]
    )
    match = a.confounding.batch_row
    assert match is not None and match.key == "batch_b2"
    assert match.pairs is not None and match.pairs.max_delta is not None and match.pairs.max_delta > 0
    # without the batch scenario the confounding is still stated, with nothing to name
    alone = run_with(tmp_path, "conc-nobatch", {}, scenarios=ScenarioSettings(), concurrency=2)
    k = att(alone).confounding
    assert k is not None and k.measured_sizes == [] and k.batch_row is None
    assert row(alone, "cache_cold_warm").confounded_with == "batch composition"


def test_every_cause_has_a_row_whatever_the_run_asked(runs: dict[str, ScoredRun]) -> None:
    keys = [r.key for r in att(runs["clean"]).rows if r.level == 0]
    assert keys == [*CAUSE_ROWS, "replica"]
    one_server = att(runs["clean"]).row("replica")  # the replicas scenario was not asked for
    assert one_server is not None and not one_server.measured
    for r in att(runs["clean"]).rows:
        assert r.held_fixed and r.varied and r.cause


def test_the_reading_ends_with_the_cause_the_rows_point_at(runs: dict[str, ScoredRun]) -> None:
    """Each fault knob's run points at its own cause (the knobs' definitions in the module docstring): the
    batch effect also changes the batched repeats (they are in a batch), not the repeats alone; the prefix
    effect's lengths are all below the prompts' full blocks (48 or 64 tokens), so no full hit is there to
    contrast and the pointer names the hit lengths without calling them partial."""
    expected = {
        "clean": (POINT_NONE, set()),
        "batch": (POINT_BATCH, {"batch", "batch_warm", "repeats"}),
        "hitlen": (POINT_HITLEN, {"hitlen"}),
        "traffic": (POINT_TRAFFIC, {"traffic"}),
    }
    for name, (kind, keys) in expected.items():
        p = pointed_cause(att(runs[name]))
        assert p.kind == kind, name
        assert {r.key for r in p.differing} == keys, name
        assert set(p.clean) == set(ALL) - {r.scenario for r in p.differing}, name
    assert reading(att(runs["clean"])).endswith(
        "Points at: no cause shows a difference: cache, batch, hitlen, repeats, traffic clean."
    )
    hit = pointed_cause(att(runs["hitlen"]))
    assert {r.value for r in hit.sub_rows} == {f"L={length}" for length in hit_lengths_diverging()}
    assert reading(att(runs["traffic"])).endswith(
        f"Points at: differences after unrelated traffic, not before it: traffic 0/{N_INPUTS}; "
        "cache, batch, hitlen, repeats clean."
    )
