"""Clean against clean on the real vLLM CPU server, gated with the SHIPPED default policy: PASS.

Two runs of `cpu-smollm2` (the session's one server, fresh salts each run) with the plan lbeval runs by default
(no --scenarios: every scenario on the default plan's scenario inputs, its hit classes, batch sizes and repeats;
the default passes and timing repetitions) on 2 shipped mini inputs at 8 output tokens, then `lbeval gate` with
no --policy (eval/gate/policy_default.toml). Nothing differs but the run, so every rule must hold or say why it
was skipped: exit 0. This is the control every fault's FAIL is read against (docs/faults.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main
from eval.gate.policy import load_policy
from eval.records.run_folder import load_run
from eval.records.scenarios import DEFAULT_PLAN
from tests.real_server.conftest import RealServer
from tests.real_server.mini import prepare_mini

pytestmark = pytest.mark.real_server

VARIANTS = ("cpu-smollm2", "cpu-smollm2-again")  # one spec, two runs under their own names


def lbeval(*argv: str) -> int:
    return main(list(argv))


def test_clean_against_clean_passes_the_shipped_default_gate(
    real_server: RealServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = tmp_path / "inputs.jsonl"
    prepare_mini(inputs, base_url=real_server.base_url)
    runs = []
    for variant in VARIANTS:
        argv = ["run", "--variant", variant, "--base-url", real_server.base_url, "--inputs", str(inputs)]
        assert (
            lbeval(*argv, "--out", str(tmp_path / "runs"), "--run-id", "r", "--max-tokens", "8", "--quiet")
            == 0
        )
        runs.append(tmp_path / "runs" / variant / "r")
    manifests = [load_run(r).manifest for r in runs]
    assert all(m.complete for m in manifests)
    # the default plan: no --scenarios given, so the manifest's scenario settings are lbeval's defaults
    for m in manifests:
        assert m.settings.scenarios == list(DEFAULT_PLAN.scenarios), m.settings
        assert m.settings.hit_classes == list(DEFAULT_PLAN.hit_classes)
        assert m.settings.batch_sizes == list(DEFAULT_PLAN.batch_sizes)
    capsys.readouterr()
    code = lbeval("gate", str(runs[0]), str(runs[1]))
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "gate: PASS (exit 0)" in printed
    assert lbeval("compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "compare")) == 0
    summary: dict[str, Any] = json.loads((tmp_path / "compare" / "summary.json").read_text(encoding="utf-8"))
    verdict = summary["verdict"]
    statuses = {r["rule"]: r["status"] for r in verdict["results"]}
    assert verdict["outcome"] == "PASS", verdict["summary"]
    # every rule the shipped policy enables was judged: held, or skipped with its reason, never failed or no data
    enabled = {name for name, rule in load_policy(None).rules.items() if rule.get("enabled", True)}
    assert enabled <= set(statuses), sorted(enabled - set(statuses))
    assert {s for s in statuses.values()} <= {"pass", "skipped"}, statuses
    assert "cause_rows" in statuses and statuses["cause_rows"] == "pass"
