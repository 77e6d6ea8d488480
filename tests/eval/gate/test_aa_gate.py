"""The timing rule relative to the A/A floor (`--aa-floor RUN_A RUN_B`, warm_prefill_change.max_change_aa_multiple)
through `lbeval gate` and `lbeval compare`, on lbeval ab sessions of noisy fake servers: a variant 60% slower
fails a 3x-floor rule on a quiet machine (the three-way rule: the interval's lower end beyond the limit) and
passes it on a very noisy one; A/A runs that are missing, not one
A/A session, or asked other inputs give no verdict with the reason named; bad policy keys are exit 78."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval.analyze.aa_floor import aa_floor
from eval.analyze.compare import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, compare
from eval.analyze.score import score_run
from eval.cli import main
from tests.eval.aa_factory import inputs_file, session


@dataclass(frozen=True)
class Sessions:
    runs: Path
    quiet: tuple[Path, Path]  # A/A, 8% noise per request
    noisy: tuple[Path, Path]  # A/A, 100% noise per request
    other_inputs: tuple[Path, Path]  # A/A on 4 other inputs
    # A/B: the variant's prefill 1.6 x the base's, 8% noise (1.3 x left the three-way rule's 97.5% interval over
    # 6 inputs, [+3%, +62%], across a 3x-floor limit of +10%: no verdict, not a FAIL)
    slower: tuple[Path, Path]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Sessions:
    root = tmp_path_factory.mktemp("aa")
    return Sessions(
        runs=root / "runs",
        quiet=session(root, "x", "x", sigma=0.08, noise_seed=1),
        noisy=session(root / "noisy", "x", "x", sigma=1.0, noise_seed=2, inputs=inputs_file(root)),
        other_inputs=session(root / "other", "x", "x", sigma=0.08, inputs=inputs_file(root / "other", n=4)),
        slower=session(
            root / "ab", "x", "y", sigma=0.08, variant_factor=1.6, noise_seed=3, inputs=inputs_file(root)
        ),
    )


def _policy(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "aa.toml"
    path.write_text(f"schema_version = 1\n[rules.warm_prefill_change]\nenabled = true\n{body}\n")
    return path


def _gate(
    s: Sessions, policy: Path, aa: tuple[Path, Path] | None, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    extra = ["--aa-floor", str(aa[0]), str(aa[1])] if aa is not None else []
    code = main(["gate", str(s.slower[0]), str(s.slower[1]), "--policy", str(policy), *extra])
    out = capsys.readouterr()
    return code, re.sub(r"\n {11}(?=\S)", " ", out.out + out.err)


def _floor(aa: tuple[Path, Path]) -> float:
    f = aa_floor(score_run(aa[0]), score_run(aa[1]), seed=BOOTSTRAP_SEED, resamples=BOOTSTRAP_RESAMPLES)
    value = f.floor("warm_prefill_ms")
    assert value is not None
    return value


def test_60pct_slower_fails_3x_a_small_floor_and_passes_3x_a_huge_one(
    sessions: Sessions, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet, noisy = _floor(sessions.quiet), _floor(sessions.noisy)
    assert 1.0 < quiet < 10.0 and noisy > 40.0  # the premise: a ~5% floor and a huge one
    policy = _policy(tmp_path, "max_change_aa_multiple = 3")
    code, out = _gate(sessions, policy, sessions.quiet, capsys)
    assert code == 1, out
    assert re.search(r"FAIL +warm_prefill_change: measured \+(5[5-9]|6[0-5])\.\d% \[97\.5% CI", out)
    assert f"3 x A/A floor {quiet:.1f}% = {3 * quiet:+.1f}%" in out
    code, out = _gate(sessions, policy, sessions.noisy, capsys)
    assert code == 0, out
    assert re.search(r"PASS +warm_prefill_change: .*3 x A/A floor", out)


def test_with_both_limits_the_smaller_applies(
    sessions: Sessions, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    noisy = _floor(sessions.noisy)
    code, out = _gate(
        sessions, _policy(tmp_path, "max_change_pct = 10\nmax_change_aa_multiple = 3"), sessions.noisy, capsys
    )
    assert code == 1 and "(the smaller: +10.0%)" in out, out
    code, out = _gate(
        sessions,
        _policy(tmp_path, "max_change_pct = 900\nmax_change_aa_multiple = 3"),
        sessions.noisy,
        capsys,
    )
    assert code == 0 and f"(the smaller: {3 * noisy:+.1f}%)" in out, out


def test_the_absolute_limit_alone_is_unchanged_and_needs_no_aa_runs(
    sessions: Sessions, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _gate(sessions, _policy(tmp_path, "max_change_pct = 5"), None, capsys)
    assert code == 1 and "threshold upper end of the 97.5% CI <= +5%" in out, out


def test_no_aa_runs_while_the_policy_needs_them_is_no_verdict_naming_the_flag(
    sessions: Sessions, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _gate(sessions, _policy(tmp_path, "max_change_aa_multiple = 3"), None, capsys)
    assert code == 2, out
    assert (
        "rule warm_prefill_change has no data: max_change_aa_multiple needs the A/A floor: give --aa-floor RUN_A RUN_B"
        in out
    )


@pytest.mark.parametrize(
    ("which", "reason"),
    [("other_inputs", "asked other inputs than the base run x/"),
     ("slower", "not an A/A calibration: its sides are two variants (x, y)")],
)  # fmt: skip
def test_aa_runs_that_cannot_calibrate_give_no_verdict_with_the_reason(
    sessions: Sessions, tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str, reason: str
) -> None:
    code, out = _gate(
        sessions, _policy(tmp_path, "max_change_aa_multiple = 3"), getattr(sessions, which), capsys
    )
    assert code == 2 and reason in out and "Traceback" not in out, out


def test_aa_runs_from_two_different_sessions_give_no_verdict(
    sessions: Sessions, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # side a of two different A/A sessions: each has a pairing, but not the same one
    code, out = _gate(
        sessions,
        _policy(tmp_path, "max_change_aa_multiple = 3"),
        (sessions.quiet[0], sessions.noisy[1]),
        capsys,
    )
    assert code == 2 and "not one lbeval ab session (no common pairing" in out, out


def test_compare_shows_the_floor_beside_each_change_and_refuses_other_inputs(
    sessions: Sessions, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, var = (str(p) for p in sessions.slower)
    aa = [str(p) for p in sessions.quiet]
    assert main(["compare", base, var, "--out", str(tmp_path / "cmp"), "--aa-floor", *aa]) == 0
    out = capsys.readouterr().out
    quiet = _floor(sessions.quiet)
    assert re.search(r"A/A floor +A/A floor from x/ab-\S+-a and x/ab-\S+-b", out)
    # the compared change is the gated figure (trimmed mean, 97.5% Yuen interval; docs/timing.md): beyond the
    # floor only when its whole interval lies outside +-floor (with 6 inputs its lower end just reaches it)
    ch = compare(score_run(sessions.slower[0]), score_run(sessions.slower[1])).timing_changes[
        "warm_prefill_ms"
    ]
    assert ch is not None
    where = "slower beyond the floor" if ch.low > quiet else "overlaps the floor"
    assert f"an A/A floor of +-{quiet:.1f}%: {where}" in re.sub(r"\n {11}", " ", out)
    md = (tmp_path / "cmp" / "report.md").read_text()
    assert "Timing change against the A/A floor" in md and where in md
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    assert "aa_floor" in json.dumps(summary)
    aa_other = [str(p) for p in sessions.other_inputs]
    assert main(["compare", base, var, "--out", str(tmp_path / "cmp2"), "--aa-floor", *aa_other]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "asked other inputs than the base run" in err[0]


@pytest.mark.parametrize(
    ("body", "message"),
    [("max_change_aa_multiple = 0.5", "max_change_aa_multiple: must be a multiple of the A/A floor in [1, 1000], got 0.5"),
     ("max_change_aa_multiple = '3'", "max_change_aa_multiple: must be float, got '3'"),
     ("max_change_aa_multiple = nan", "max_change_aa_multiple: must be a finite number, got nan"),
     ("aa_multiple = 3", "rules.warm_prefill_change.aa_multiple: unknown key (known: enabled, interleaved_only, max_change_aa_multiple, max_change_pct, max_foreign_fraction)")],
)  # fmt: skip
def test_bad_aa_policy_keys_are_one_line_exit_78(
    sessions: Sessions, tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str
) -> None:
    code, out = _gate(sessions, _policy(tmp_path, body), sessions.quiet, capsys)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 78 and len(lines) == 1 and message in lines[0], out
