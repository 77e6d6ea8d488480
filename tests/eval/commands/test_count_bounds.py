"""The counts that size a plan or what runs at once are bounded on the command line: past the limit, one usage
line naming the option and the limit (exit 64), before any inputs are read or any server is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.cli import build_parser, main
from eval.commands.options import MAX_CONCURRENCY, MAX_DP_RANKS, MAX_TIMING_REPS
from tests.eval.fake_fixtures import make_row, write_rows

DEAD = "http://127.0.0.1:9/v1"  # nothing answers: a value that got past the options would fail on the server


def _argv(command: str, inputs: Path, *extra: str) -> list[str]:
    if command == "run":
        return ["run", "--variant", "v", "--inputs", str(inputs), "--base-url", DEAD, *extra]
    return ["ab", "x", "y", "--inputs", str(inputs), "--base-url-a", DEAD, "--base-url-b", DEAD, *extra]


@pytest.mark.parametrize(
    ("command", "option", "value", "limit"),
    [
        ("run", "--timing-reps", "100000000", MAX_TIMING_REPS),
        ("run", "--timing-reps", str(MAX_TIMING_REPS + 1), MAX_TIMING_REPS),
        ("ab", "--timing-reps", "100000000", MAX_TIMING_REPS),
        ("run", "--concurrency", "100000000", MAX_CONCURRENCY),
        ("run", "--dp-ranks", "100000000", MAX_DP_RANKS),
    ],
)
def test_a_count_past_its_limit_is_one_usage_line_naming_the_option_and_the_limit(
    command: str, option: str, value: str, limit: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(_argv(command, tmp_path / "absent.jsonl", option, value))
    assert info.value.code == 64
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1, errors
    assert f"argument {option}: from 1 to {limit}, got '{value}'" in errors[0]


@pytest.mark.parametrize(
    ("option", "limit"),
    [("--timing-reps", MAX_TIMING_REPS), ("--concurrency", MAX_CONCURRENCY), ("--dp-ranks", MAX_DP_RANKS)],
)
def test_the_limit_itself_is_accepted_and_the_help_names_it(
    option: str, limit: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(_argv("run", Path("inputs.jsonl"), option, str(limit)))
    assert getattr(args, option[2:].replace("-", "_")) == limit
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"1-{limit}" in help_text.rsplit(option, 1)[1][:120]


def test_more_than_64_replicas_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    urls = [a for port in range(10000, 10065) for a in ("--base-url", f"http://127.0.0.1:{port}/v1")]
    assert (
        main(["run", "--variant", "v", "--inputs", str(inputs), *urls, "--out", str(tmp_path / "runs")]) == 78
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["lbeval run: error: --base-url: at most 64 replicas, got 65"], err
    assert not (tmp_path / "runs").exists()
