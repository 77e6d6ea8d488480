"""cross_variant_cold end to end on the fake server, through `lbeval run` (the default plan) and `lbeval gate`
(the shipped default policy): a variant that reports every logprob 0.3 nats lower, tokens untouched (the fake's
`logprob_shift` knob, the plugin's logprob_shift fault), FAILS on that rule alone; a clean pair PASSES; the same
shifted server run through a launch spec that declares `numerics = "changed: ..."` PASSES, the verdict naming the
spec."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eval.cli import main
from tests.eval.fake_fixtures import make_row, write_rows
from tests.eval.shipped_policy import SEQUENTIAL, checked_rules
from tests.support.fake_server import FakeServer

WORDS = (40, 47, 52)


def _run(tmp: Path, variant: str, shift: float, spec: str = "") -> None:
    inputs = tmp / "inputs.jsonl"
    if not inputs.exists():
        write_rows(inputs, [make_row(i, words=w) for i, w in enumerate(WORDS)])
    with FakeServer() as fake:
        fake.logprob_shift = shift
        argv = ["run", "--variant", variant, "--inputs", str(inputs), "--out", str(tmp / "runs"), "--quiet"]
        argv += ["--timing-reps", "2"]
        if spec:
            specs = tmp / f"{variant}.toml"
            specs.write_text(
                f'[variants.{variant}]\nurl = "{fake.base_url}"\nnumerics = "changed: {spec}"\n',
                encoding="utf-8",
            )
            argv += ["--specs", str(specs)]
        else:
            argv += ["--base-url", fake.base_url]
        assert main(argv) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cross-numerics")
    _run(tmp, "base", 0.0)
    _run(tmp, "clean", 0.0)
    _run(tmp, "shifted", -0.3)
    _run(tmp, "declared", -0.3, spec="logprobs renormalised")
    return tmp / "runs"


def _gate(runs: Path, variant: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["gate", "base", variant, "--runs", str(runs)])
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def test_a_clean_pair_passes_the_default_gate(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate(runs, "clean", capsys)
    assert code == 0, out
    # the default plan's batch and repeats rows are the base's own noise (0 on the fake): the floor applies
    assert re.search(
        r"PASS cross_variant_cold: measured base cold vs variant cold within the base's own noise on 3/3 "
        r"inputs \(token IDs equal 3/3, max top-k logprob \|delta\| 0; base noise 0 \((batch|repeats)\S*\)\)",
        out,
    ), out


def test_a_logprob_only_shift_fails_the_default_gate_on_that_rule_alone(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _gate(runs, "shifted", capsys)
    assert code == 1, out
    assert (
        "FAIL cross_variant_cold: measured base cold vs variant cold within the base's own noise on 0/3"
        in out
    )
    assert "max top-k logprob |delta| 0.3;" in out
    checked = checked_rules(*SEQUENTIAL)
    assert out.endswith(f"gate: FAIL (exit 1): 1 of {checked} rules failed: cross_variant_cold")
    # every other rule, cause_rows included, sees a variant that agrees with itself
    assert "PASS cause_rows" in out and "PASS cold_warm_equality" in out


def test_a_launch_spec_declaring_the_change_passes_naming_it(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = json.loads(next((runs / "declared").glob("*/manifest.json")).read_text())
    assert [(s["launch_spec"], s["numerics"]) for s in manifest["sessions"]] == [
        ("declared", "changed: logprobs renormalised")
    ]
    code, out = _gate(runs, "declared", capsys)
    assert code == 0, out
    assert (
        "PASS cross_variant_cold: measured numerics changed on purpose, declared by the variant run's launch "
        'spec declared: "logprobs renormalised" (not judged: token IDs equal 3/3, max top-k logprob |delta| 0.3)'
    ) in out
