"""An unverified cache state (a llama-cpp-python run) in the analysis, the reports and the gate.

Base: the fake vLLM server; variant: the fake speaking llama-cpp-python's dialect (no cached-token count),
on the same inputs. Rules that judge cache states give no verdict unless the policy accepts an unverified cache
state; the reports label it `unverified` wherever a cache state shows, never as met.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.compare import Comparison, compare
from eval.analyze.score import score_run
from eval.cli import main
from eval.errors import ConfigError
from eval.gate.cache_state import NEEDS_VERIFIED_CACHE
from eval.gate.policy import load_policy, parse_policy
from eval.gate.rules import evaluate
from eval.gate.verdict import EXIT_NO_VERDICT, NO_DATA, PASS, SKIPPED
from eval.report.console import score_summary
from eval.report.json_out import summary_json
from eval.report.markdown import scores_markdown
from eval.report.tables import build_tables
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    tmp = tmp_path_factory.mktemp("unverified")
    inputs = write_rows(tmp / "inputs.jsonl", [make_row(0), make_row(1, dataset="gov_report", mode="raw")])
    out = tmp / "runs"
    with FakeServer() as vllm:
        base = execute_run(config_for(vllm, inputs, out, variant="vllm", timing_reps=1))
    with FakeServer(dialect="llama-cpp-python") as llama:  # the same model name: no mismatch
        variant = execute_run(
            config_for(llama, inputs, out, variant="llamacpp", cold_mode="auto", timing_reps=1)
        )
    return base, variant, out


@pytest.fixture(scope="module")
def comparison(runs: tuple[Path, Path, Path]) -> Comparison:
    base, variant, _ = runs
    return compare(score_run(base), score_run(variant))


def test_the_scores_say_which_run_is_unverified(comparison: Comparison) -> None:
    b, v = comparison.base.scores.cache_verification, comparison.variant.scores.cache_verification
    assert b is not None and b.verified and b.server_kind == "vllm"
    assert (
        v is not None and not v.verified and v.state == "unverified" and v.server_kind == "llama-cpp-python"
    )
    assert (
        v.unverified_records == v.records > 0 and v.cold_mode == "evict" and "NOT verified" in v.cold_method
    )
    cold = next(x for x in comparison.variant.scores.cache if x.pass_name == "cold")
    assert cold.ok == 0 and cold.unverified == cold.n_total == 2  # never counted as met


def test_rules_on_cache_states_give_no_verdict(comparison: Comparison) -> None:
    verdict = evaluate(comparison, load_policy(None))
    assert verdict.exit_code == EXIT_NO_VERDICT
    by_rule = {r.rule: r for r in verdict.results}
    for name in ("cold_warm_equality", "warm_repeat_equality", "no_invalid_warm"):
        assert by_rule[name].status == NO_DATA
        assert (
            "cache state unverified" in by_rule[name].measured
            and "llama-cpp-python" in by_rule[name].measured
        )
        assert "data.accept_unverified_cache" in by_rule[name].threshold
    assert by_rule["cold_scores"].status != NO_DATA  # cold outputs' scores do not need a cache state
    assert by_rule["hitlen_cache_honoured"].status == SKIPPED  # nothing to judge: skipped, not "no data"
    assert any("cold_warm_equality has no data: cache state unverified" in r for r in verdict.reasons)
    assert "no_invalid_warm" in NEEDS_VERIFIED_CACHE


def test_a_policy_may_accept_an_unverified_cache_state(comparison: Comparison) -> None:
    policy = load_policy(None)
    policy = replace(policy, data={**policy.data, "accept_unverified_cache": True})
    verdict = evaluate(comparison, policy)
    assert verdict.exit_code == 0, verdict.summary  # a verdict: the fakes agree, so it passes
    cw = next(r for r in verdict.results if r.rule == "cold_warm_equality")
    assert (
        cw.status == PASS and "cache state UNVERIFIED, accepted by data.accept_unverified_cache" in cw.detail
    )


def test_the_policy_parameter_is_a_bool() -> None:
    with pytest.raises(ConfigError, match="accept_unverified_cache: must be bool"):
        parse_policy('schema_version = 1\n[data]\naccept_unverified_cache = "yes"\n', "p.toml")
    assert load_policy(None).data["accept_unverified_cache"] is False


def test_reports_label_the_cache_state_unverified(comparison: Comparison) -> None:
    tables = {t.id: t for t in build_tables(comparison)}
    cache = tables["cache"].as_json()
    rows = {r["key"]: r["cells"] for r in cache["rows"]}
    base_col, var_col = cache["columns"][1], cache["columns"][2]
    assert rows["server"][var_col] == "llama-cpp-python 0.3.36" and rows["server"][base_col].startswith(
        "vLLM"
    )
    assert rows["cache_state"][base_col] == "verified"
    assert rows["cache_state"][var_col].startswith("UNVERIFIED")
    assert rows["cold_ok"][var_col] == "unverified 2/2" and rows["cold_ok"][base_col] == {"k": 2, "n": 2}
    assert "UNVERIFIED" in tables["cache"].reading and "Every cache check" not in tables["cache"].reading
    assert "Cache state UNVERIFIED in variant" in tables["agreement"].reading
    summary = summary_json(comparison, list(tables.values()))
    assert any("UNVERIFIED" in w for w in summary["warnings"])


def test_scores_md_and_the_terminal_summary_say_unverified(comparison: Comparison) -> None:
    scores = comparison.variant.scores
    text = scores_markdown(scores)
    assert "cache state UNVERIFIED" in text and "| cold | 0 cached tokens | unverified 2/2 |" in text
    lines = "\n".join(score_summary(scores, [Path("scores.md")]))
    assert "UNVERIFIED" in lines and "every pass met its cache expectation" not in lines
    base_lines = "\n".join(score_summary(comparison.base.scores, [Path("scores.md")]))
    assert "every pass met its cache expectation" in base_lines


def test_lbeval_gate_exits_2_and_compare_works(
    runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, out = runs
    assert main(["gate", "vllm", "llamacpp", "--runs", str(out)]) == EXIT_NO_VERDICT
    printed = capsys.readouterr().out
    assert "cache state unverified" in printed
    assert main(["compare", "vllm", "llamacpp", "--runs", str(out)]) == 0
    report = (out / "compare" / "vllm__llamacpp" / "report.md").read_text()
    assert "UNVERIFIED" in report and "unverified 2/2" in report


def test_across_engines_compare_needs_allow_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another engine serves the model under another name (other weights): compare refuses without
    --allow-mismatch, naming the model; with it the report warns and shows the cross-engine figures."""
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])
    out = tmp_path / "runs"
    with FakeServer(model="smollm2") as vllm:
        execute_run(config_for(vllm, inputs, out, variant="vllm", passes=("cold", "warm", "repeat")))
    with FakeServer(dialect="llama-cpp-python", model="smollm2-q4_1-gguf") as llama:
        config = config_for(
            llama, inputs, out, variant="llamacpp", cold_mode="auto", passes=("cold", "warm", "repeat")
        )
        execute_run(config)
    capsys.readouterr()
    assert main(["compare", "vllm", "llamacpp", "--runs", str(out)]) == 2
    assert "model (base smollm2, variant smollm2-q4_1-gguf)" in capsys.readouterr().err
    assert main(["compare", "vllm", "llamacpp", "--runs", str(out), "--allow-mismatch"]) == 0
    summary = (out / "compare" / "vllm__llamacpp" / "summary.json").read_text()
    assert "compared despite a mismatch in model" in summary and "llama-cpp-python" in summary
