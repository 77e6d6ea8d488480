"""Gate policy files: every unreadable or invalid policy is one ConfigError naming the file and key, which
`lbeval gate` turns into no verdict (exit 2) and `lbeval compare` into ConfigError's exit code, never a
traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import ConfigError
from eval.gate.policy import DATA_PARAMS, RULE_PARAMS, Number, Text, load_policy, parse_policy
from eval.serve.launch_specs import load_launch_specs
from tests.eval.runfactory import base_and_variant, write_run

BAD_VALUES = [
    # (table, key, value, message)
    ("data", "min_valid_pair_fraction", "-1", "must be a fraction in [0, 1], got -1.0"),
    ("data", "min_valid_pair_fraction", "1.5", "must be a fraction in [0, 1], got 1.5"),
    ("data", "min_valid_pair_fraction", "nan", "must be a finite number, got nan"),
    ("data", "min_valid_pair_fraction", "inf", "must be a finite number, got inf"),
    ("data", "min_valid_pairs", "-1", "must be a count >= 0, got -1"),
    ("data", "min_valid_pairs", "nan", "must be int, got nan"),
    ("rules.cold_warm_equality", "allowed_drop", "-1", "must be a count >= 0, got -1"),
    ("rules.warm_repeat_equality", "min_fraction", "2", "must be a fraction in [0, 1], got 2.0"),
    ("rules.warm_repeat_equality", "min_fraction", "-nan", "must be a finite number, got nan"),
    ("rules.cold_scores", "tolerance_points", "-0.5", "must be score points >= 0, got -0.5"),
    ("rules.cold_scores", "tolerance_points", "inf", "must be a finite number, got inf"),
    ("rules.no_invalid_warm", "max", "-2", "must be a count >= 0, got -2"),
    ("rules.no_errors", "max", "-1", "must be a count >= 0, got -1"),
    ("rules.warm_prefill_change", "max_change_pct", "-5", "must be a percentage >= 0, got -5.0"),
    ("rules.warm_prefill_change", "max_change_pct", "nan", "must be a finite number, got nan"),
    ("rules.warm_prefill_change", "max_change_pct", "-inf", "must be a finite number, got -inf"),
    ("rules.cross_variant_cold", "min_fraction", "-0.1", "must be a fraction in [0, 1], got -0.1"),
    ("rules.cross_variant_cold", "min_fraction", "true", "must be float, got True"),
    ("rules.cross_variant_cold", "delta_factor", "0.5", "must be a factor >= 1, got 0.5"),
    (
        "rules.cross_variant_cold",
        "delta_floor",
        "-0.01",
        "must be a logprob difference >= 0 (nats), got -0.01",
    ),
    ("rules.cross_variant_cold", "delta_floor", "nan", "must be a finite number, got nan"),
    ("rules.cross_variant_cold", "numerics", "1", "must be str, got 1"),
    (
        "rules.cross_variant_cold",
        "numerics",
        '"fp8 KV cache"',
        'must read "changed: REASON" (e.g. numerics = "changed: fp8 KV cache"), got \'fp8 KV cache\'',
    ),
    (
        "rules.cross_variant_cold",
        "numerics",
        '"changed:   "',
        'names no reason after "changed:" (e.g. numerics = "changed: fp8 KV cache")',
    ),
    (
        "rules.cross_variant_cold",
        "numerics",
        '"changed: fp8\\u202e"',
        "its reason holds a control or formatting character (one line of printable text)",
    ),
    (
        "rules.cross_variant_cold",
        "numerics",
        '"changed: ' + "x" * 121 + '"',
        "its reason is 121 characters long, at most 120",
    ),
]


def _policy(table: str, key: str, value: str) -> str:
    return f"schema_version = 1\n[{table}]\n{key} = {value}\n"


@pytest.mark.parametrize(("table", "key", "value", "message"), BAD_VALUES)
def test_out_of_range_or_non_finite_values_are_refused(
    table: str, key: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(f"p.toml: {table}.{key}: {message}") + "$"):
        parse_policy(_policy(table, key, value), "p.toml")


def test_every_numeric_parameter_has_a_range() -> None:
    params = [*DATA_PARAMS.values(), *(p for rule in RULE_PARAMS.values() for p in rule.values())]
    assert all(isinstance(kind, (Number, Text)) for kind, _ in params if kind not in (bool, list))


@pytest.mark.parametrize(
    ("table", "key", "value"),
    [("data", "min_valid_pair_fraction", "0"), ("data", "min_valid_pair_fraction", "1"),
     ("data", "min_valid_pairs", "0"), ("rules.no_errors", "max", "0"),
     ("rules.cold_scores", "tolerance_points", "0"), ("rules.warm_prefill_change", "max_change_pct", "0.0")],
)  # fmt: skip
def test_range_ends_are_accepted(table: str, key: str, value: str) -> None:
    policy = parse_policy(_policy(table, key, value), "p.toml")
    section = policy.data if table == "data" else policy.rules[table.removeprefix("rules.")]
    assert section[key] == float(value)


def test_non_utf8_policy_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_bytes(b"schema_version = 1\n# caf\xe9\n[data]\n")
    with pytest.raises(ConfigError, match="^" + re.escape(f"{path}:2: not UTF-8 (byte 0xe9)")):
        load_policy(path)


def _bad_files(tmp_path: Path) -> list[tuple[Path, str]]:
    """(policy file, what the one error line must say) for each kind of unreadable or invalid policy."""
    cases: list[tuple[Path, bytes | None, str]] = [
        (tmp_path / "latin1.toml", b"schema_version = 1\n# caf\xe9\n", ":2: not UTF-8 (byte 0xe9)"),
        (tmp_path / "binary.toml", b"\xff\xfe\x00s", ":1: not UTF-8 (byte 0xff)"),
        (tmp_path / "neg.toml", _policy("data", "min_valid_pair_fraction", "-1").encode(),
         ": data.min_valid_pair_fraction: must be a fraction in [0, 1], got -1.0"),
        (tmp_path / "nan.toml", _policy("data", "min_valid_pair_fraction", "nan").encode(),
         ": data.min_valid_pair_fraction: must be a finite number, got nan"),
        (tmp_path / "pct.toml", _policy("rules.warm_prefill_change", "max_change_pct", "-1").encode(),
         ": rules.warm_prefill_change.max_change_pct: must be a percentage >= 0"),
        (tmp_path / "key.toml", _policy("data", "min_pairs", "1").encode(), ": data.min_pairs: unknown key"),
        (tmp_path / "type.toml", _policy("rules.no_errors", "max", "'0'").encode(),
         ": rules.no_errors.max: must be int, got '0'"),
        (tmp_path / "toml.toml", b"schema_version = [\n", ": not valid TOML"),
        (tmp_path / "missing.toml", None, ": cannot read the policy (No such file or directory)"),
    ]  # fmt: skip
    for path, data, _ in cases:
        if data is not None:
            path.write_bytes(data)
    return [(path, f"{path}{message}") for path, _, message in cases]


def test_lbeval_gate_stops_with_the_config_exit_code_for_every_bad_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a bad policy is a configuration error (exit 78, EX_CONFIG), not the gate's "no verdict" (2): the
    # exit codes tell a broken policy file from runs that cannot support a verdict
    runs = tmp_path / "runs"
    for spec in base_and_variant(tmp_path):
        write_run(runs, spec)  # good runs: the policy is the only problem
    for path, expected in _bad_files(tmp_path):
        code = main(["gate", "main", "patched", "--runs", str(runs), "--policy", str(path)])
        captured = capsys.readouterr()
        err = " ".join(captured.err.split())
        assert code == ConfigError.exit_code == 78, path
        assert err.startswith("lbeval gate: error: ") and expected in err and "Traceback" not in err, err
        assert "NO VERDICT" not in captured.out


def test_lbeval_compare_stops_with_the_config_exit_code_for_a_bad_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, expected in _bad_files(tmp_path)[:4]:
        code = main(["compare", "main", "patched", "--runs", str(tmp_path / "runs"), "--policy", str(path)])
        captured = capsys.readouterr()
        assert code == ConfigError.exit_code and captured.err.startswith("lbeval compare: error: ")
        assert expected in " ".join(captured.err.split())


@pytest.mark.parametrize(
    ("body", "absolute", "multiple"),
    [("", 10.0, None), ("max_change_pct = 2", 2.0, None), ("max_change_aa_multiple = 3", None, 3.0),
     ("max_change_pct = 2\nmax_change_aa_multiple = 1", 2.0, 1.0), ("max_change_aa_multiple = 1000", None, 1000.0)],
)  # fmt: skip
@pytest.mark.parametrize("name", ["warm_prefill_change", "cold_prefill_change"])
def test_timing_limits_absolute_default_unless_only_the_aa_multiple_is_stated(
    body: str, absolute: float | None, multiple: float | None, name: str
) -> None:
    rule = parse_policy(f"schema_version = 1\n[rules.{name}]\n{body}\n", "p.toml").rules[name]
    assert rule["max_change_pct"] == absolute and rule["max_change_aa_multiple"] == multiple
    assert rule["interleaved_only"] is True


@pytest.mark.parametrize("value", ["0.99", "0", "1001", "-3", "inf"])
def test_aa_multiple_out_of_range_is_refused(value: str) -> None:
    with pytest.raises(
        ConfigError, match=r"^p\.toml: rules\.warm_prefill_change\.max_change_aa_multiple: must be"
    ):
        parse_policy(_policy("rules.warm_prefill_change", "max_change_aa_multiple", value), "p.toml")


def test_the_shipped_policy_and_specs_are_named_by_their_real_paths() -> None:
    """What `lbeval gate` prints as its policy, and every error about a shipped spec, names a file that exists."""
    root = Path(__file__).resolve().parents[3]
    source = load_policy(None).source
    assert source == "eval/gate/policy_default.toml" and (root / source).is_file()
    sources = {spec.source for spec in load_launch_specs().values()}
    assert sources == {"eval/serve/variants.toml"} and (root / "eval/serve/variants.toml").is_file()
