"""lbeval gate: pass, a failure per rule, the fail-closed cases (exit 2), JUnit XML, the messages users see."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main
from eval.errors import ConfigError
from eval.gate.policy import DATA_PARAMS, RULE_PARAMS, load_policy, parse_policy
from tests.eval.runfactory import RunSpec, base_and_variant, write_run
from tests.eval.shipped_policy import RUNFACTORY, checked_rules

ROOT = Path(__file__).resolve().parents[3]
TIMING_POLICY = """
schema_version = 1
[rules.warm_prefill_change]
enabled = true
max_change_pct = 5.0
interleaved_only = false
"""


CHECKED = checked_rules(*RUNFACTORY)  # what the shipped policy checks on two runs of base_and_variant


def unwrap(text: str) -> str:
    """The gate's lines as one line each: its output is wrapped at 100 columns, continuations indented 11."""
    return re.sub(r"\n {11}(?=\S)", " ", text)


def _gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: RunSpec, variant: RunSpec, *extra: str
) -> tuple[int, str]:
    runs = tmp_path / "runs"
    write_run(runs, base)
    write_run(runs, variant)
    code = main(["gate", "main", "patched", "--runs", str(runs), *extra])
    captured = capsys.readouterr()
    return code, unwrap(captured.out + captured.err)


def _specs(tmp_path: Path, **variant_kw: Any) -> tuple[RunSpec, RunSpec]:
    return base_and_variant(tmp_path, **variant_kw)


def test_default_policy_documents_every_rule_with_its_defaults() -> None:
    policy = load_policy(None)
    assert set(policy.rules) == set(RULE_PARAMS)
    for rule, params in RULE_PARAMS.items():
        for name, (_, default) in params.items():
            assert policy.rules[rule][name] == default, (rule, name)
    assert policy.data == {k: d for k, (_, d) in DATA_PARAMS.items()}
    off = ("batch_invariant", "hitlen_equality")
    off += ("repeats_single_output", "traffic_invariant")
    assert all(policy.rules[r]["enabled"] is False for r in off)
    assert all(policy.rules[r]["enabled"] for r in RULE_PARAMS if r not in off)


def test_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path))
    assert code == 0, out
    assert (
        "PASS     cold_warm_equality: measured variant 6/6, base 6/6; threshold variant >= base - 0 = 6"
        in out
    )
    assert "PASS     warm_repeat_equality: measured variant 6/6; threshold >= 1 of N (6/6)" in out
    assert (
        "cold_scores: measured qasper cold outputs identical 4/4; gov_report cold outputs identical 2/2"
        in out
    )
    # two `lbeval run`s are sequential: the timing rules (on by default) are listed, not judged, not blocking
    for rule in ("warm_prefill_change", "cold_prefill_change"):
        assert (
            f"SKIPPED  {rule}: sequential runs (may be machine drift); timing is gated in interleaved "
            "sessions (lbeval ab), or with interleaved_only = false"
        ) in out
    assert (
        "PASS     cross_variant_cold: measured base cold vs variant cold within the base's own noise on 6/6"
        in out
    )
    assert out.rstrip().endswith(f"gate: PASS (exit 0): all {CHECKED} rules hold")


def test_fail_cold_warm_equality(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate(
        tmp_path,
        capsys,
        *_specs(
            tmp_path,
            texts={("qas01", "warm", 0): "the BLEU metric", ("qas01", "repeat", 0): "the BLEU metric"},
        ),
    )
    assert code == 1
    assert (
        "FAIL     cold_warm_equality: measured variant 5/6, base 6/6; threshold variant >= base - 0 = 6"
        in out
    )
    assert f"gate: FAIL (exit 1): 2 of {CHECKED} rules failed: cold_warm_equality, cause_rows" in out


def test_fail_warm_repeat_equality(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path, texts={("gov00", "repeat", 0): "Something else."}))
    assert code == 1
    assert "FAIL     warm_repeat_equality: measured variant 5/6; threshold >= 1 of N (6/6)" in out
    assert f"2 of {CHECKED} rules failed: warm_repeat_equality, cause_rows" in out


def test_fail_cold_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = {(ex, p, 0): "no idea" for ex in ("qas00",) for p in ("cold", "warm", "repeat")}
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path, texts=texts))
    assert code == 1
    # qas00: "no idea" vs "yes" -> 0; qasper cold = round(100 * 3/4, 2) = 75.00 vs 100.00
    assert (
        "FAIL     cold_scores: measured qasper 75.00 vs base 100.00 (-25.00); gov_report cold outputs "
        "identical 2/2; threshold |variant - base| <= 0.5 points per dataset, or identical cold outputs "
        "(outside tolerance: qasper)"
    ) in out


def test_cold_scores_within_tolerance_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # different words, same qa_f1 (normalization drops "the"): outputs differ, scores equal -> cold_scores
    # passes; the other cold tokens are outside the base's own noise, so cross_variant_cold alone fails
    texts = {("qas01", p, 0): "BLEU score" for p in ("cold", "warm", "repeat")}
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path, texts=texts))
    assert code == 1, out
    assert "PASS     cold_scores: measured qasper 100.00 vs base 100.00 (+0.00)" in out
    assert out.rstrip().endswith(f"gate: FAIL (exit 1): 1 of {CHECKED} rules failed: cross_variant_cold")


def test_fail_no_invalid_warm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path, invalid={("qas00", "warm", 0): True}))
    assert code == 1
    assert (
        "FAIL     no_invalid_warm: measured invalid warm attempts: base 0, variant 1; threshold <= 0 per run"
        in out
    )


def test_fail_no_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path, errors={("qas00", "control_salt", 0)}))
    assert code == 1
    assert "FAIL     no_errors: measured errored requests: base 0, variant 1; threshold <= 0 per run" in out


CROSS_POLICY = """
schema_version = 1
[data]
min_valid_pair_fraction = 0.5  # the errored cold sample below leaves 5/6 valid cold/warm pairs
[rules.cross_variant_cold]
enabled = true
"""


def test_cross_variant_cold_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # on by default; these runs have no batch, repeats or replica rows: the floor (0.01) alone is the limit
    code, out = _gate(tmp_path / "same", capsys, *_specs(tmp_path / "same"))
    assert code == 0, out
    assert (
        "PASS     cross_variant_cold: measured base cold vs variant cold within the base's own noise on 6/6 "
        "inputs (token IDs equal 6/6, max top-k logprob |delta| 0; the base measured no batch, repeats or "
        "replica row: the floor alone); threshold >= 1 of N (6/6) inputs with equal token IDs and max |delta| "
        "<= max(base noise x 10, 0.01) = 0.01, unless declared"
    ) in out
    # logprob drift under the floor (same tokens) passes
    drift = _specs(tmp_path / "drift", position_shifts={("qas00", "cold", 0): {0: 1e-5}})
    code, out = _gate(tmp_path / "drift", capsys, *drift)
    assert code == 0 and "(token IDs equal 6/6, max top-k logprob |delta| 1e-05;" in out
    # every generated logprob shifted by 0.3 nats, tokens untouched: the variant agrees with itself (cold, warm,
    # repeat), and is outside the base's noise on every input
    inputs = ("qas00", "qas01", "qas02", "qas03", "gov00", "gov01")
    shifted = {(r, p, 0): -0.3 for r in inputs for p in ("cold", "warm", "repeat")}
    code, out = _gate(tmp_path / "shift", capsys, *_specs(tmp_path / "shift", shifts=shifted))
    assert code == 1, out
    assert (
        "within the base's own noise on 0/6 inputs (token IDs equal 6/6, max top-k logprob |delta| 0.3;"
        in out
    )
    assert "(outside: qasper/qas00 max |delta| 0.3, qasper/qas01 max |delta| 0.3, " in out
    assert "and 1 more)" in out and out.rstrip().endswith(f"1 of {CHECKED} rules failed: cross_variant_cold")
    # a diverging and an errored variant cold sample: both count in N, neither is within
    policy = tmp_path / "cross.toml"
    policy.write_text(CROSS_POLICY)
    bad = _specs(
        tmp_path / "bad", texts={("qas01", "cold", 0): "the BLEU metric"}, errors={("gov00", "cold", 0)}
    )
    code, out = _gate(tmp_path / "bad", capsys, *bad, "--policy", str(policy))
    assert code == 1
    assert (
        "FAIL     cross_variant_cold: measured base cold vs variant cold within the base's own noise on 4/6 "
        "inputs (token IDs equal 4/6, max top-k logprob |delta| 0;"
    ) in out
    assert "(outside: qasper/qas01 token IDs differ from token 2; pairs not compared: 1 errored)" in out
    # declared in the policy: named, not judged
    policy.write_text(CROSS_POLICY + 'numerics = "changed: fp8 KV cache"\n')
    code, out = _gate(
        tmp_path / "declared", capsys, *_specs(tmp_path / "declared", shifts=shifted), "--policy", str(policy)
    )
    assert code == 0, out
    assert (
        'PASS     cross_variant_cold: measured numerics changed on purpose, declared by the policy: "fp8 KV '
        'cache" (not judged: token IDs equal 6/6, max top-k logprob |delta| 0.3); threshold a declared '
        "numerics change is named, not judged"
    ) in out


def test_timing_rule_pass_and_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "timing.toml"
    policy.write_text(TIMING_POLICY)
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path), "--policy", str(policy))
    assert code == 0, out
    assert "PASS     warm_prefill_change: measured -19.9% [95% CI" in out
    slower = {"timing_cold": 0.200, "timing_warm": 0.070}  # 70 + 10 * 2.5 + 0.5 = 95.5 ms vs 75.5: +26.5%
    code, out = _gate(
        tmp_path / "slow",
        capsys,
        *_specs(tmp_path, prefill_s=slower, prefill_step_s=0.010),
        "--policy",
        str(policy),
    )
    assert code == 1
    assert "FAIL     warm_prefill_change: measured +26.5% [95% CI" in out
    assert "threshold upper end of the 95% CI <= +5%" in out


# ---------------------------------------------------------------- fail closed: exit 2


def test_a_variant_without_runs_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 64 (EX_USAGE), no longer 2 "no verdict": a name that matches no run is a mistyped command line
    base, _ = _specs(tmp_path)
    runs = tmp_path / "runs"
    write_run(runs, base)
    code = main(["gate", "main", "patched", "--runs", str(runs)])
    err = capsys.readouterr().err
    assert code == 64 and "NO VERDICT" not in err
    assert err == (
        f"lbeval gate: error: patched: not a run folder (no manifest.json) and no run of a variant named "
        f"'patched' under {runs}/ (variants with runs there: main)\n"
    )


def test_a_mistyped_variant_gets_a_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    for spec in _specs(tmp_path):
        write_run(runs, spec)
    (runs / "compare").mkdir()  # folders without runs are not variants
    for argv in (["gate", "main", "patchd"], ["compare", "main", "patchd"], ["score", "patchd"]):
        assert main([*argv, "--runs", str(runs)]) == 64
        err = capsys.readouterr().err
        assert err.endswith("(did you mean patched? variants with runs there: main, patched)\n"), err


def test_no_verdict_incomplete_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate(
        tmp_path, capsys, *_specs(tmp_path, complete=False, missing={("gov01", "control_sibling", 0)})
    )
    assert code == 2
    # 6 inputs x (3 passes + 2 x 2 timing + 2 controls) = 54 planned, one missing
    assert (
        "gate: NO VERDICT (exit 2): variant run 20260909T103000Z-test is incomplete (53/54 planned requests have a record)"
        in out
    )


def test_invalid_manifest_is_one_line_and_no_verdict_in_gate_and_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, variant = _specs(tmp_path)
    runs = tmp_path / "runs"
    write_run(runs, base)
    run_dir = write_run(runs, variant)
    manifest = run_dir / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"expected_records": 54', '"expected_records": "lots"'))
    line = f"{manifest}:expected_records: must be int, got str 'lots'"
    assert main(["gate", "main", "patched", "--runs", str(runs)]) == 2
    out, err = capsys.readouterr()
    assert f"gate: NO VERDICT (exit 2): {line}" in unwrap(out) and "Traceback" not in out + err
    assert main(["score", str(run_dir)]) == 2
    out, err = capsys.readouterr()
    assert err == f"lbeval score: error: {line}\n" and out == ""


def _cut_last_line(records: Path) -> None:
    data = records.read_bytes()
    records.write_bytes(data[: len(data) - 40])  # `truncate -s -40`: the last record torn


def _drop_line(records: Path, lineno: int) -> None:
    lines = records.read_bytes().splitlines(keepends=True)
    records.write_bytes(b"".join(lines[: lineno - 1] + lines[lineno:]))


def _garble_line(records: Path, lineno: int) -> None:
    lines = records.read_bytes().splitlines(keepends=True)
    lines[lineno - 1] = lines[lineno - 1][:30] + b"\n"
    records.write_bytes(b"".join(lines))


def _duplicate_lines(records: Path) -> None:
    lines = records.read_bytes().splitlines(keepends=True)
    records.write_bytes(b"".join(lines + lines[:2]))  # a second writer sent the first two requests again


VARIANT_ID = "20260909T103000Z-test"
DUPLICATES = (
    "2 duplicate record(s) of 2 request slot(s), the same slot, group and attempt recorded twice (two writers?): "
    "qasper/qas00 cold rep 0 attempt 0 group 0, qasper/qas00 warm rep 0 attempt 0 group 0"
)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (
            _cut_last_line,
            "records.jsonl: 1 unreadable record line(s) (torn or damaged): line 54; line 54: no newline (a "
            "torn last line)",
        ),
        (
            lambda p: _garble_line(p, 10),
            "records.jsonl: 1 unreadable record line(s) (torn or damaged): line 10; line 10: ",
        ),
        (
            lambda p: _drop_line(p, 10),
            "the manifest says complete, but only 53/54 planned requests have a record (records were lost)",
        ),
        (_duplicate_lines, DUPLICATES),
    ],
)
@pytest.mark.parametrize("require_complete", [True, False])
def test_damaged_records_never_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any, reason: str, require_complete: bool
) -> None:
    # a complete run whose records were damaged afterwards: no verdict (exit 2) naming the damage, even with
    # a policy that accepts incomplete runs; `lbeval score` reports the run incomplete with the same line
    base, variant = _specs(tmp_path)
    runs = tmp_path / "runs"
    write_run(runs, base)
    run_dir = write_run(runs, variant)
    damage(run_dir / "records.jsonl")
    policy = tmp_path / "policy.toml"
    default = (ROOT / "eval" / "gate" / "policy_default.toml").read_text()
    assert "\nrequire_complete = true\n" in default
    policy.write_text(
        default.replace(
            "\nrequire_complete = true\n", f"\nrequire_complete = {str(require_complete).lower()}\n"
        )
    )
    code = main(["gate", "main", "patched", "--runs", str(runs), "--policy", str(policy)])
    out = unwrap(capsys.readouterr().out)
    assert code == 2, out
    assert f"gate: NO VERDICT (exit 2): variant run {VARIANT_ID} is damaged: {reason}" in out
    assert main(["score", str(run_dir), "--full"]) == 0  # --full: scores.md, not the compact summary
    out = capsys.readouterr().out
    assert "complete: no" in out and f"warning: damaged: {reason}".replace("_", "\\_").strip() in out
    scores = json.loads((run_dir / "scores.json").read_text())["run"]
    assert (
        scores["complete"] is False and len(scores["damage"]) == 1 and scores["damage"][0].startswith(reason)
    )


def test_no_verdict_mismatched_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path, settings={"top_p": 0.9}))
    assert code == 2
    assert "NO VERDICT (exit 2): the runs differ in settings.top_p (base 1.0, variant 0.9)" in out


def test_too_few_valid_pairs_with_a_failing_rule_is_a_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """4/6 valid pairs < 0.9 * 6 = 5.4 would be no verdict alone (tests/eval/gate/test_fail_over_thin_data.py),
    but the errors that make them invalid fail no_errors on whole, matched runs: FAIL, naming the rule."""
    errors = {("qas00", "cold", 0), ("qas01", "cold", 0)}
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path, errors=errors))
    assert code == 1
    assert "FAIL     no_errors: measured errored requests: base 0, variant 2" in out
    assert "valid cold/warm pairs, needs at least" not in out


def test_no_verdict_timing_rule_without_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "timing.toml"
    policy.write_text(TIMING_POLICY)
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path, metrics=False), "--policy", str(policy))
    assert code == 2
    assert (
        "NO DATA  warm_prefill_change: measured no paired server warm prefill times (needs /metrics and timing "
        "passes)"
    ) in out
    assert "rule warm_prefill_change has no data" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("schema_version = 1\n[rules.cold_warm_equality]\nallowed_drops = 1\n",
         "rules.cold_warm_equality.allowed_drops: unknown key (known: allowed_drop, enabled)"),
        ("schema_version = 1\n[rules.no_such_rule]\n", "rules.no_such_rule: unknown rule"),
        ("schema_version = 2\n", "schema_version must be 1, got 2"),
        ("schema_version = 1\n[rules.no_errors]\nmax = '0'\n", "rules.no_errors.max: must be int, got '0'"),
        ("schema_version = 1\n[rules.no_errors]\nruns = ['basee']\n", 'runs: must be a non-empty list of "base"'),
        ("schema_version = 1\n[data]\nmin_valid_pairs = true\n", "data.min_valid_pairs: must be int, got True"),
        ("schema_version = [", "not valid TOML"),
    ],
)  # fmt: skip
def test_bad_policy_is_a_config_error(text: str, message: str) -> None:
    with pytest.raises(
        ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
    ):
        parse_policy(text, "p.toml")


def test_bad_policy_is_a_configuration_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "bad.toml"
    policy.write_text("schema_version = 1\n[rules.no_such_rule]\n")
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path), "--policy", str(policy))
    # 78 (EX_CONFIG), no longer 2: a typo in the policy is not the data's "no verdict"
    assert code == 78 and "lbeval gate: error: " in out and "rules.no_such_rule: unknown rule" in out
    assert "NO VERDICT" not in out


def test_empty_policy_gives_no_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "empty.toml"
    policy.write_text("schema_version = 1\n")
    code, out = _gate(tmp_path, capsys, *_specs(tmp_path), "--policy", str(policy))
    assert code == 2 and "NO VERDICT (exit 2): the policy checks no rule" in out


# ---------------------------------------------------------------- JUnit


def test_junit_one_case_per_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "out" / "gate.xml"
    code, _ = _gate(
        tmp_path, capsys, *_specs(tmp_path, invalid={("qas00", "warm", 0): True}), "--junit", str(junit)
    )
    assert code == 1
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == set(RULE_PARAMS)
    # skipped: the rules the shipped policy disables, hitlen_cache_honoured without hitlen, and the two timing
    # rules on sequential runs
    assert suite.get("tests") == str(len(RULE_PARAMS)) and suite.get("failures") == "1"
    assert suite.get("skipped") == str(len(RULE_PARAMS) - CHECKED)
    failure = cases["no_invalid_warm"].find("failure")
    assert failure is not None and "base 0, variant 1" in (failure.get("message") or "")
    assert cases["warm_prefill_change"].find("skipped") is not None


def test_junit_no_verdict_has_a_data_error_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an incomplete run (no longer a missing one: that is a usage error, exit 64, and writes no JUnit)
    junit = tmp_path / "gate.xml"
    spec = _specs(tmp_path, complete=False, missing={("gov01", "control_sibling", 0)})
    code, _ = _gate(tmp_path, capsys, *spec, "--junit", str(junit))
    assert code == 2
    root = ET.parse(junit).getroot()
    case = next(c for c in root.iter("testcase") if c.get("name") == "data")
    error = case.find("error")
    assert error is not None and "is incomplete (53/54 planned requests have a record)" in (error.text or "")


def test_a_rule_on_a_pass_neither_run_planned_is_not_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = {"passes": ["cold", "warm"]}  # no repeat pass planned by either run: nothing to measure
    base, variant = _specs(tmp_path, settings=settings)
    base.settings = settings
    code, out = _gate(tmp_path, capsys, base, variant)
    assert "SKIPPED  warm_repeat_equality: not planned: neither run planned the repeat pass" in out
    assert code == 0, out  # the rules on what was planned decide


def test_no_verdict_when_a_rule_has_nothing_to_measure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = {"passes": ["cold", "warm"]}  # the base planned a repeat pass, the variant did not
    base, variant = _specs(tmp_path, settings=settings)
    code, out = _gate(tmp_path, capsys, base, variant)
    assert code == 2
    assert "NO DATA  warm_repeat_equality: measured the variant run has no warm/repeat pairs" in out
    assert "rule warm_repeat_equality has no data" in out


def test_a_run_gated_against_itself_gives_no_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, variant = _specs(tmp_path)
    runs = tmp_path / "runs"
    write_run(runs, base)
    write_run(runs, variant)
    run_dir = next((runs / "main").glob("2*"))
    for args in (["main", "main", "--runs", str(runs)], [str(run_dir), str(run_dir)]):
        capsys.readouterr()
        assert main(["gate", *args]) == 2  # it PASSed: every rule agrees with itself
        out = unwrap(capsys.readouterr().out)
        assert f"base and variant are the same run (folder {run_dir}): a run always agrees with itself" in out
        assert (
            out.rstrip()
            .splitlines()[-1]
            .startswith("gate: NO VERDICT (exit 2): base and variant are the same")
        )
