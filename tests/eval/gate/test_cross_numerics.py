"""cross_variant_cold (eval/gate/cross_numerics.py): per input, base cold vs variant cold within the base's own
benign noise x delta_factor, at least delta_floor; a declared numerics change named, not judged.

The limits below are computed by hand: max(noise x 10, 0.01)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from eval.analyze.agreement import PairStats
from eval.analyze.attribution import Attribution, AttributionRow
from eval.cli import main
from eval.errors import ConfigError
from eval.gate.cross_numerics import BaseNoise, InputPair, base_noise, judge, run_declaration
from eval.records.manifest_parts import ManifestError, SessionEntry
from eval.records.run_folder import MANIFEST_NAME
from tests.eval.runfactory import base_and_variant, write_run

PARAMS = {"min_fraction": 1.0, "delta_factor": 10.0, "delta_floor": 0.01, "numerics": ""}
QUIET = BaseNoise(4e-5, "batch_b2", 3, flips=False)  # the CPU server's batch rows
FLIPPY = BaseNoise(4e-5, "batch_b2", 3, flips=True)  # a base whose own batch rows flipped a near tie
NOISY = BaseNoise(0.005, "repeats", 2, flips=False)  # limit 0.05
NONE = BaseNoise(0.0, None, 0, flips=False)  # no benign row: the floor


def same(delta: float | None) -> InputPair:
    return InputPair("qasper/q0", True, delta, None, False)


def diverged(at: int, delta: float, near_tie: bool) -> InputPair:
    return InputPair("qasper/q0", False, delta, at, near_tie)


CASES = [
    # (what, base noise, the input, outside why ("" within), limit)
    ("bit-identical", QUIET, same(0.0), "", 0.01),
    ("benign: 1-core drift 7e-5", QUIET, same(7e-5), "", 0.01),
    ("no top-k compared", QUIET, same(None), "", 0.01),
    ("logprob shift 0.3, tokens untouched", QUIET, same(0.3), "max |delta| 0.3", 0.01),
    ("just above the floor", QUIET, same(0.0101), "max |delta| 0.0101", 0.01),
    (
        "fp8-like: diverges at 5",
        QUIET,
        diverged(5, 2.9, near_tie=False),
        "token IDs differ from token 5",
        0.01,
    ),
    (
        "near-tie flip, the base never flips",
        QUIET,
        diverged(3, 1e-5, True),
        "token IDs differ from token 3",
        0.01,
    ),
    ("near-tie flip, the base flips too", FLIPPY, diverged(3, 1e-5, True), "", 0.01),
    (
        "clear flip, the base flips too",
        FLIPPY,
        diverged(3, 1e-5, False),
        "token IDs differ from token 3",
        0.01,
    ),
    ("near-tie flip with a big delta", FLIPPY, diverged(3, 0.5, True), "max |delta| 0.5", 0.01),
    ("noisy base: 10x its noise", NOISY, same(0.049), "", 0.05),
    ("noisy base: above 10x", NOISY, same(0.051), "max |delta| 0.051", 0.05),
    ("no benign row: the floor", NONE, same(0.009), "", 0.01),
    ("no benign row: above the floor", NONE, same(0.011), "max |delta| 0.011", 0.01),
]


@pytest.mark.parametrize(("what", "noise", "pair", "why", "limit"), CASES, ids=[c[0] for c in CASES])
def test_one_input_against_the_base_noise(
    what: str, noise: BaseNoise, pair: InputPair, why: str, limit: float
) -> None:
    j = judge([pair], 1, noise, PARAMS)
    assert j.limit == pytest.approx(limit)
    assert j.outside == ([("qasper/q0", why)] if why else [])
    assert j.within == (0 if why else 1)


def test_inputs_not_compared_are_never_within() -> None:
    j = judge([same(0.0), same(0.3)], 4, QUIET, PARAMS)  # 2 of 4 inputs had no ok pair in both runs
    assert (j.within, j.n_total) == (1, 4)


def test_factor_and_floor_are_the_policy_s() -> None:
    assert judge([same(0.0)], 1, NOISY, {**PARAMS, "delta_factor": 2.0}).limit == pytest.approx(0.01)
    assert judge([same(0.0)], 1, NOISY, {**PARAMS, "delta_floor": 0.2}).limit == pytest.approx(0.2)


def stats(n: int, tokens_equal: int, delta: float | None) -> PairStats:
    return PairStats("a", "b", n, n, tokens_equal, tokens_equal, n, delta, 3, 0, 0, 0)


def row(
    key: str, scenario: str, s: PairStats | None, measured: bool = True, level: int = 1
) -> AttributionRow:
    return AttributionRow(key, "c", "cond", scenario, "", "", measured, level, None, pairs=s)


def attribution(rows: list[AttributionRow]) -> Attribution:
    return Attribution(["cache"], 1, 4, 1, rows, None)


def test_the_noise_is_the_largest_benign_row_of_the_base() -> None:
    a = attribution(
        [
            row("cache_cold_warm", "cache", stats(4, 4, 0.9), level=0),  # a warm-path difference: not benign
            row("hitlen_1B", "hitlen", stats(1, 0, 2.0)),  # not benign
            row("batch", "batch", stats(2, 2, 4e-5), level=0),
            row("batch_b2", "batch", stats(2, 2, 4e-5)),
            row("repeats_alone", "repeats", stats(2, 2, 2e-5)),
            row("replica", "replicas", None, measured=False, level=0),  # one replica: not run
            row("traffic", "traffic", stats(1, 1, 3.0), level=0),  # not benign
        ]
    )
    assert base_noise(a) == BaseNoise(4e-5, "batch", 3, flips=False)


def test_a_benign_row_with_other_tokens_means_the_engine_flips() -> None:
    a = attribution(
        [row("repeats", "repeats", stats(4, 3, 1e-5), level=0), row("batch_b2", "batch", stats(2, 2, None))]
    )
    assert base_noise(a) == BaseNoise(1e-5, "repeats", 2, flips=True)


def test_no_benign_row_is_noise_zero() -> None:
    assert base_noise(attribution([row("cache_cold_warm", "cache", stats(4, 4, 0.0), level=0)])) == NONE
    assert base_noise(None) == NONE


def run_with(sessions: list[dict[str, Any]]) -> Any:
    lines = [SessionEntry.from_dict(s, "manifest.json", i) for i, s in enumerate(sessions)]
    return SimpleNamespace(
        scores=SimpleNamespace(run=SimpleNamespace(run_id="r1")),
        loaded=SimpleNamespace(manifest=SimpleNamespace(sessions=lines)),
    )


FP8 = {"launch_spec": "cpu-smollm2-fp8kv", "numerics": "changed: fp8 KV cache"}


def test_a_run_declares_what_every_session_s_launch_spec_declared() -> None:
    found = run_declaration("variant", run_with([FP8, dict(FP8)]))
    assert found is not None
    assert (found.by, found.reason) == ("the variant run's launch spec cpu-smollm2-fp8kv", "fp8 KV cache")
    assert run_declaration("base", run_with([{"launch_spec": "cpu-smollm2", "numerics": ""}, {}])) is None
    assert run_declaration("base", run_with([])) is None


@pytest.mark.parametrize(
    ("sessions", "message"),
    [
        ([FP8, {"launch_spec": "cpu-smollm2", "numerics": ""}], "its sessions disagree"),
        ([FP8, {}], "its sessions disagree"),
        ([{"launch_spec": "x", "numerics": "fp8"}], 'session 1: numerics: must read "changed: REASON"'),
        ([{"launch_spec": "../x y", "numerics": "changed: fp8"}], "launch_spec must name the spec"),
        ([{"numerics": "changed: fp8"}], "launch_spec must name the spec"),
    ],
)
def test_a_malformed_or_ambiguous_declaration_is_refused(
    sessions: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        run_declaration("variant", run_with(sessions))


def test_a_declaration_that_is_not_a_string_is_a_damaged_manifest() -> None:
    with pytest.raises(ManifestError, match="manifest.json:sessions.0.numerics: must be str, got int 3"):
        run_with([{"launch_spec": "x", "numerics": 3}])


# ---------------------------------------------------------------- through lbeval gate, from the manifest


def _gate_declared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sessions: list[dict[str, Any]]
) -> tuple[int, str]:
    inputs = ("qas00", "qas01", "qas02", "qas03", "gov00", "gov01")
    shifted = {(r, p, 0): -0.3 for r in inputs for p in ("cold", "warm", "repeat")}
    base, variant = base_and_variant(tmp_path, shifts=shifted)
    runs = tmp_path / "runs"
    write_run(runs, base)
    manifest = write_run(runs, variant) / MANIFEST_NAME
    doc = json.loads(manifest.read_text())
    doc["sessions"] = sessions
    manifest.write_text(json.dumps(doc))
    code = main(["gate", "main", "patched", "--runs", str(runs)])
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def test_a_launch_spec_s_declaration_is_named_in_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _gate_declared(tmp_path / "declared", capsys, [FP8])
    assert code == 0, out
    assert (
        "PASS cross_variant_cold: measured numerics changed on purpose, declared by the variant run's launch "
        'spec cpu-smollm2-fp8kv: "fp8 KV cache" (not judged: token IDs equal 6/6, max top-k logprob |delta| 0.3)'
    ) in out
    # the same runs without it: FAIL (the declaration is what passes them)
    code, out = _gate_declared(tmp_path / "undeclared", capsys, [{"launch_spec": "cpu-smollm2-fp8kv"}])
    assert code == 1 and "FAIL cross_variant_cold" in out


def test_sessions_that_disagree_give_no_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate_declared(tmp_path, capsys, [FP8, {"launch_spec": "cpu-smollm2", "numerics": ""}])
    assert code == 2, out
    assert (
        "rule cross_variant_cold has no data: a declared numerics change cannot be read: variant run" in out
    )
    assert "its sessions disagree on the declared numerics change" in out
