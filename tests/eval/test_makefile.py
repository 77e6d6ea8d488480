"""The make targets the README documents, as `make -n` prints them: which lbeval options each variable
turns into (no command is run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry(*args: str) -> str:
    proc = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return " ".join(proc.stdout.split())


def test_eval_starts_the_variants_launch_spec_on_the_mini_sample() -> None:
    out = dry("eval", "VARIANT=cpu-smollm2", "SOURCE=mini", "N=3", "MAX_TOKENS=16", "TIMING_REPS=2")
    assert "inputs=runs/inputs/mini-qasper+gov_report-n3-seed20260909.jsonl;" in out
    assert (
        "lbeval prepare --source mini --datasets qasper,gov_report --n 3 --seed 20260909 --spec cpu-smollm2"
        in out
    )
    run = out[out.index("lbeval run ") :]
    assert "--variant cpu-smollm2" in run and "--max-tokens 16 --timing-reps 2" in run
    assert "--base-url" not in run and "--spec" not in run  # lbeval run picks the spec named like the variant


def test_eval_against_a_running_server_or_a_named_spec() -> None:
    out = dry("eval", "VARIANT=patched", "BASE_URL=http://127.0.0.1:9000/v1")
    assert out.count("--base-url http://127.0.0.1:9000/v1") == 2 and "--spec" not in out  # prepare and run
    assert "inputs=runs/inputs/hub-qasper+gov_report-n16-seed20260909.jsonl;" in out
    out = dry("eval", "VARIANT=mine", "SPEC=cpu-smollm2-chunked", "SPECS=a.toml b.toml")
    assert "--spec cpu-smollm2-chunked --specs a.toml --specs b.toml" in out
    assert "--max-tokens" not in out and "--timing-reps" not in out  # the run's defaults


def test_a_relative_junit_path_goes_under_the_comparison_folder() -> None:
    out = dry("gate", "BASE=a", "VARIANT=b", "JUNIT=gate.xml")
    assert "lbeval gate a b --runs runs --junit runs/compare/a__b/gate.xml" in out
    assert "--junit /tmp/g.xml" in dry("gate", "BASE=a", "VARIANT=b", "JUNIT=/tmp/g.xml")
    assert "--junit" not in dry("gate", "BASE=a", "VARIANT=b")


def test_ab_prepares_once_then_one_interleaved_session_scores_both_and_names_the_next_step() -> None:
    out = dry(
        "ab", "BASE=cpu-smollm2", "VARIANT=cpu-smollm2-fp8kv", "SOURCE=mini", "N=3", "MAX_TOKENS=16",
        "TIMING_REPS=2", "SCENARIOS=cache,hitlen", "AB_ARGS=--seed 3",
    )  # fmt: skip
    assert "inputs=runs/inputs/mini-qasper+gov_report-n3-seed20260909.jsonl;" in out  # make eval's file
    assert (
        "lbeval prepare --source mini --datasets qasper,gov_report --n 3 --seed 20260909 --spec cpu-smollm2"
        in out
    )
    ab = out[out.index("lbeval ab ") : out.index("| tail -n 2")]
    assert ab.startswith("lbeval ab cpu-smollm2 cpu-smollm2-fp8kv --inputs $inputs --out runs")
    assert "--passes cold,warm,repeat,controls,timing" in ab and "--max-tokens 16" in ab
    assert "--timing-reps 2" in ab and "--scenarios cache,hitlen" in ab and ab.rstrip().endswith("--seed 3")
    assert "--base-url" not in ab  # lbeval ab starts both launch specs
    assert (
        'for run_dir in $dirs; do echo "make ab: run $run_dir"; .venv/bin/lbeval score "$run_dir"; done'
        in out
    )
    assert "make ab: next: make compare BASE=cpu-smollm2 VARIANT=cpu-smollm2-fp8kv" in out
