"""The run session (eval/run/session.py): the run folder's lock is taken before a launch spec's server starts
(a run the lock refuses starts no server), a spec's relative server log goes under the runs folder (--out), and
`lbeval ab` takes every option of `lbeval run` that applies to one side.

The managed servers are the tests' fake vLLM (tests/support/fake_server.py) as child processes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from eval.cli import main
from eval.commands import ab as ab_command
from eval.commands import run as run_command
from eval.prepare.inputs import inputs_digest
from eval.records.run_folder import run_lock
from eval.run.runner import default_run_id
from eval.serve.launch_specs import LaunchSpec
from eval.serve.process import launch
from tests.eval.fake_fixtures import make_row, write_rows

ROOT = Path(__file__).resolve().parents[3]
# the server writes a marker file when it starts (a refused run must not start it), then serves
CODE = (
    "import sys, pathlib, time; pathlib.Path(sys.argv[2]).write_text('started'); "
    "from tests.support.fake_server import FakeServer; s = FakeServer(); s.port = int(sys.argv[1]); s.start(); "
    "time.sleep(3600)"
)


def specs_file(tmp_path: Path, marker: Path) -> Path:
    path = tmp_path / "specs.toml"
    path.write_text(  # no `log`: the default, relative, so under the runs folder
        f"""
[variants.fakevllm]
command = [{sys.executable!r}, "-c", {CODE!r}]
args = ["{{port}}", {str(marker)!r}]
env = {{ PYTHONPATH = {str(ROOT)!r} }}
port = "auto"
model = "fake-model"
""",
        encoding="utf-8",
    )
    return path


def run_argv(tmp_path: Path, specs: Path, inputs: Path) -> list[str]:
    return ["run", "--variant", "fakevllm", "--specs", str(specs), "--inputs", str(inputs),
            "--out", str(tmp_path / "out"), "--passes", "cold", "--quiet"]  # fmt: skip


def test_a_run_the_lock_refuses_starts_no_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "started"
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    run_dir = tmp_path / "out" / "fakevllm" / default_run_id(inputs_digest(inputs))
    with run_lock(run_dir):  # another lbeval run writing this run folder
        code = main(run_argv(tmp_path, specs_file(tmp_path, marker), inputs))
    err = capsys.readouterr().err
    assert code == 1 and "another lbeval run" in err, err
    assert not marker.exists()  # the lock was taken first: no server was started for nothing
    assert not (tmp_path / "out" / "servers").exists()


def test_ab_refused_by_one_sides_lock_starts_no_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "started"
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    specs = specs_file(tmp_path, marker)
    with run_lock(tmp_path / "out" / "fakevllm" / "aa-b"):
        code = main(["ab", "fakevllm", "fakevllm", "--specs", str(specs), "--inputs", str(inputs),
                     "--out", str(tmp_path / "out"), "--run-id", "aa", "--timing-reps", "1", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "another lbeval run" in err, err
    assert not marker.exists()


def test_a_spec_servers_log_goes_under_the_runs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a log resolved against the working folder would land in tmp_path/servers
    marker = tmp_path / "started"
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    assert main(run_argv(tmp_path, specs_file(tmp_path, marker), inputs)) == 0
    run_dir = tmp_path / "out" / "fakevllm" / default_run_id(inputs_digest(inputs))
    server = json.loads((run_dir / "servers.jsonl").read_text(encoding="utf-8"))
    log = Path(server["log"])
    assert log.parent == tmp_path / "out" / "servers" and log.name == f"fakevllm-{server['port']}.log"
    assert "starting fakevllm" in log.read_text(encoding="utf-8") and marker.exists()
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["sessions"][0]["base_url"] == f"http://127.0.0.1:{server['port']}/v1"  # the started one
    assert not (tmp_path / "servers").exists() and not (tmp_path / "runs").exists()


def test_launch_puts_a_relative_log_under_runs_and_leaves_an_absolute_one(tmp_path: Path) -> None:
    quick = (sys.executable, "-c", "pass")
    server = launch(
        LaunchSpec(name="v", source="s.toml", command=quick, log="logs/{name}.log"), runs=tmp_path
    )
    server.stop()
    assert server.log_path == tmp_path / "logs" / "v.log" and server.log_path.exists()
    absolute = tmp_path / "elsewhere" / "v.log"
    spec = LaunchSpec(name="v", source="s.toml", command=quick, log=str(absolute))
    server = launch(spec, runs=tmp_path / "unused")
    server.stop()
    assert server.log_path == absolute and not (tmp_path / "unused").exists()


def options(configure: object) -> set[str]:
    p = argparse.ArgumentParser()
    configure(p)  # type: ignore[operator]
    return {s for a in p._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


# the deliberate differences between one `lbeval run` and `lbeval ab` (which takes every other run option)
RUN_ONLY = {
    "--variant": "ab names both sides positionally (BASE VARIANT)",
    "--base-url": "ab: --base-url-a / --base-url-b",
    "--spec": "ab: --spec-a / --spec-b",
    "--concurrency": "ab sends one request at a time",
    "--dp-ranks": "ab pairs replicas given as endpoints, not a routing endpoint's ranks (eval/run/replicas.refuse_ranks_in_ab)",
    "--seed": "ab's --seed is the pairs' AB/BA order; the sampling seed is --sampling-seed",
}
AB_ONLY = {
    "--base-url-a", "--base-url-b", "--spec-a", "--spec-b",  # one server per side
    "--sampling-seed",  # run's --seed
    "--stop-when-settled", "--policy",  # time to verdict (eval/gate/settle.py)
    "--aa-floor",  # the stop check's A/A floor (a timing rule stated as a multiple of it)
    "--timing-until", "--timing-budget",  # adaptive timing repetitions (eval/run/adaptive.py)
    "--seed",  # the pairs' order
}  # fmt: skip


def test_lbeval_ab_takes_every_option_of_lbeval_run_but_the_deliberate_differences() -> None:
    run, ab = options(run_command.configure), options(ab_command.configure)
    assert run - ab == set(RUN_ONLY) - {"--seed"}  # --seed is in both, with two meanings
    assert ab - run == AB_ONLY - {"--seed"}
    assert {"--api-key-env", "--timeout", "--retries", "--backoff", "--cold", "--model"} <= ab


def test_ab_sides_get_the_one_side_options_and_a_specs_api_key_env(tmp_path: Path) -> None:
    specs = tmp_path / "specs.toml"
    specs.write_text(
        '[variants.authed]\nurl = "http://127.0.0.1:9/v1"\napi_key_env = "AUTHED_KEY"\nmodel = "m"\n',
        encoding="utf-8",
    )
    p = argparse.ArgumentParser()
    ab_command.configure(p)
    args = p.parse_args(["base", "authed", "--inputs", "i.jsonl", "--base-url-a", "http://127.0.0.1:8/v1",
                         "--specs", str(specs), "--timeout", "5", "--retries", "1", "--backoff", "0.5",
                         "--cold", "reset", "--sampling-seed", "7", "--seed", "3"])  # fmt: skip
    a, b = ab_command.side_configs(args)
    assert a.api_key_env is None and b.api_key_env == "AUTHED_KEY" and b.model == "m"
    assert b.base_url == "http://127.0.0.1:9/v1" and a.base_url == "http://127.0.0.1:8/v1"
    for side in (a, b):
        assert side.timeout_s == 5.0 and side.retry.retries == 1 and side.retry.backoff_s == 0.5
        assert side.cold_mode == "reset" and side.request.seed == 7 and side.concurrency == 1
    both = p.parse_args(["x", "y", "--inputs", "i.jsonl", "--base-url-a", "http://h:1/v1",
                         "--base-url-b", "http://h:2/v1", "--api-key-env", "K"])  # fmt: skip
    assert [s.api_key_env for s in ab_command.side_configs(both)] == ["K", "K"]
