"""Every option and input validated, tried as an attacker would: each bad value ends in one line
naming the option, or the file, line and field, with exit 64 / 65 / 78; never a hang, a traceback or a silent
substitution of another value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.benchmarks.longbench.sources import DatasetFiles
from eval.benchmarks.longbench_v2.sources import parse_rows
from eval.cli import main
from eval.errors import ConfigError, DataError
from eval.prepare.inputs import read_inputs
from eval.records.run_folder import PAIRS_NAME, RESERVED_VARIANTS
from eval.run.request import RequestSettings, build_request
from eval.run.runner import default_run_id, execute_run
from tests.eval.fake_fixtures import config_for, fake_fixture, make_row, write_rows  # noqa: F401 - fixture
from tests.support.fake_server import FakeServer

DEEP = "[" * 100_000 + "]" * 100_000  # past any recursion limit


def run_argv(inputs: Path, *extra: str) -> list[str]:
    # a URL nothing answers: a value that got past validation would hang on retries, not pass silently
    return ["run", "--variant", "v", "--inputs", str(inputs), "--base-url", "http://127.0.0.1:9/v1", *extra]


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The command refuses argv on the command line: exit 64 and the one error line."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 64
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1, errors
    return errors[0]


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--backoff", "nan", "finite"),
        ("--backoff", "inf", "finite"),
        ("--backoff", "1e308", "from 0 to 30"),
        ("--backoff", "-1", "from 0 to 30"),
        ("--timeout", "inf", "finite"),
        ("--timeout", "nan", "finite"),
        ("--timeout", "0", "more than 0"),
        ("--timeout", "1e12", "at most 86400"),
        ("--retries", "-1", "from 0 to 100"),
        ("--retries", "100000", "from 0 to 100"),  # 2.0 ** attempt overflows long before
        ("--max-tokens", "0", "at least 1"),
        ("--max-tokens", "-1", "at least 1"),
        ("--timing-reps", "0", "at least 1"),
        ("--concurrency", "0", "at least 1"),
        ("--chat-template-kwargs", '{"a": NaN}', "NaN is not JSON"),
        ("--chat-template-kwargs", '{"a": -Infinity}', "-Infinity is not JSON"),
        ("--chat-template-kwargs", '{"a": "\\ud800"}', "lone surrogate \\ud800"),
        ("--chat-template-kwargs", DEEP, "nested too deeply"),
        ("--chat-template-kwargs", "[1]", "a JSON object or 'none'"),
    ],
)
def test_a_bad_option_value_is_one_line_naming_it(
    option: str, value: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(run_argv(tmp_path / "inputs.jsonl", option, value), capsys)
    assert f"argument {option}: " in line
    assert says in line


@pytest.mark.parametrize(
    ("option", "value"), [("--backoff", "nan"), ("--timeout", "inf"), ("--retries", "-1")]
)
def test_ab_takes_the_same_validated_retry_options(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ab", "a", "b", "--inputs", str(tmp_path / "i.jsonl"), option, value]
    assert f"argument {option}: " in refused(argv, capsys)


def test_ab_hands_its_retry_options_to_both_sides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`lbeval ab` with one server dead: --retries 0 --timeout 2 end each unit at once instead of ~16 s."""
    import eval.commands.ab as ab_command

    seen = []
    monkeypatch.setattr(ab_command, "execute_ab", lambda config, **kw: seen.append(config) or 1 / 0)
    argv = ["ab", "a", "b", "--inputs", str(tmp_path / "i.jsonl"), "--base-url-a", "http://127.0.0.1:9/v1"]
    argv += ["--base-url-b", "http://127.0.0.1:10/v1", "--retries", "0", "--backoff", "0.5", "--timeout", "2"]
    with pytest.raises(ZeroDivisionError):
        main(argv)
    for side in (seen[0].a, seen[0].b):
        assert (side.retry.retries, side.retry.backoff_s, side.timeout_s) == (0, 0.5, 2.0)


def test_max_tokens_override_is_sent_as_given_never_replaced() -> None:
    row = make_row(0)  # its own limit is 6
    for override in (1, 0, -1):  # 0 and -1 never reach here from the command line; if they do, as given
        req = build_request(
            row, RequestSettings(max_tokens_override=override), model="m", cache_salt=None, stream=False
        )
        assert req["max_tokens"] == override
    req = build_request(row, RequestSettings(), model="m", cache_salt=None, stream=False)
    assert req["max_tokens"] == 6


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--repeats", "0", "--repeats: between 2 and 1000"),  # was read as the default 10
        ("--repeats", "1", "--repeats: between 2 and 1000"),
        ("--scenario-inputs", "0", "--scenario-inputs: at least 1"),
        ("--scenario-max-tokens", "-5", "--scenario-max-tokens: at least 1"),
    ],
)
def test_a_bad_scenario_option_is_refused_by_the_scenarios_own_check(
    option: str, value: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = run_argv(tmp_path / "inputs.jsonl", "--scenarios", "cache,repeats", option, value, "--quiet")
    assert main(argv) == 78
    assert capsys.readouterr().err.splitlines() == [f"lbeval run: error: {says}"]


def test_repeats_from_a_spec_table_is_not_replaced_by_the_default() -> None:
    import argparse

    from eval.commands.run import scenario_config

    args = argparse.Namespace(scenarios="repeats")
    assert (
        scenario_config(args, {"repeats": 0}).repeats == 0
    )  # then refused by validate_scenarios, not read as 10


@pytest.mark.parametrize("name", sorted(RESERVED_VARIANTS) + ["Servers"])
def test_a_reserved_variant_name_is_refused(name: str, fake: FakeServer, tmp_path: Path) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    with pytest.raises(ConfigError, match=rf"variant '{name}': reserved \(runs/{name.lower()}/"):
        execute_run(config_for(fake, inputs, tmp_path / "runs", variant=name))
    assert not (tmp_path / "runs" / name).exists()


def test_run_refuses_to_resume_into_an_ab_run_folder(fake: FakeServer, tmp_path: Path) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    from eval.prepare.inputs import inputs_digest

    run_dir = tmp_path / "runs" / "v1" / default_run_id(inputs_digest(inputs))
    run_dir.mkdir(parents=True)
    (run_dir / PAIRS_NAME).write_text("")
    with pytest.raises(ConfigError, match=rf"^{run_dir} is one side of an lbeval ab session .*{PAIRS_NAME}"):
        execute_run(config_for(fake, inputs, tmp_path / "runs"))
    assert sorted(p.name for p in run_dir.iterdir()) == [".lock", PAIRS_NAME]  # nothing written


# ---------------------------------------------------------------- data files and inputs manifests

GOOD = {
    "input": "q",
    "context": "c",
    "answers": ["a"],
    "length": 1,
    "dataset": "qasper",
    "language": "en",
    "all_classes": None,
    "_id": "x1",
}


def test_a_lone_surrogate_escape_in_a_data_file_names_file_line_field(tmp_path: Path) -> None:
    path = tmp_path / "data" / "qasper.jsonl"
    path.parent.mkdir()
    bad = json.dumps(dict(GOOD, _id="x2")).replace('"context": "c"', '"context": "c\\ud800"')
    path.write_text(json.dumps(GOOD) + "\n" + bad + "\n")
    with pytest.raises(
        DataError, match=rf"^{path}:2:context: not valid Unicode \(a lone surrogate \\ud800\)"
    ):
        DatasetFiles(tmp_path).read("qasper")


def test_deeply_nested_json_in_a_data_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "data" / "qasper.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(GOOD) + "\n" + DEEP + "\n")
    with pytest.raises(DataError, match=rf"^{path}:2: not valid JSON \(nested too deeply\)"):
        DatasetFiles(tmp_path).read("qasper")


def test_v2_data_lone_surrogate_and_deep_nesting() -> None:
    row = {
        "_id": "a", "domain": "d", "sub_domain": "s", "difficulty": "easy", "length": "short",
        "question": "q\ud800", "choice_A": "A", "choice_B": "B", "choice_C": "C", "choice_D": "D",
        "answer": "B", "context": "c",
    }  # fmt: skip
    with pytest.raises(DataError, match=r"^data.json:1:question: not valid Unicode .*\(row 0\)"):
        parse_rows("data.json", json.dumps([row]).encode())
    with pytest.raises(DataError, match=r"^data.json:1: not valid JSON \(nested too deeply\)"):
        parse_rows("data.json", ("[" + DEEP + "]").encode())
    with pytest.raises(DataError, match=r"^data.json: not valid JSON \(nested too deeply\)"):
        parse_rows("data.json", ("{" + '"a":' * 1 + DEEP + "}").encode())


def test_deeply_nested_json_in_an_inputs_manifest_names_file_and_line(tmp_path: Path) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    with inputs.open("a") as fh:
        fh.write(DEEP + "\n")
    with pytest.raises(DataError, match=rf"^{inputs}:3: not valid JSON \(nested too deeply\)"):
        read_inputs(inputs)


def test_the_commands_exit_65_on_such_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    with inputs.open("a") as fh:
        fh.write(DEEP + "\n")
    assert main(run_argv(inputs, "--out", str(tmp_path / "runs"), "--quiet")) == 65
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"lbeval run: error: {inputs}:3: not valid JSON (nested too deeply)"]
