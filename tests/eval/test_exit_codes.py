"""Exit codes: usage (64), data (65) and configuration (78) errors have codes of their own, distinct from the
gate's 0 / 1 / 2; `lbeval --help` lists every code; an interrupt says what was kept and how to resume."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import eval.commands.run as run_command
from eval.cli import main
from eval.demo import interrupted_lines
from eval.prepare.inputs import inputs_digest
from eval.run.resume import resume_command
from tests.eval.fake_fixtures import make_row, write_rows
from tests.eval.runfactory import base_and_variant, write_run
from tests.support.fake_server import FakeServer


@pytest.mark.parametrize(
    "argv", [["gate"], ["no-such-command"], ["score", "x", "--no-such-option"], ["run", "--variant", "v"]]
)
def test_a_bad_command_line_exits_64(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 64
    assert "error:" in capsys.readouterr().err


def test_help_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    epilog = out[out.index("exit codes:") :]
    codes = [int(line.split()[0]) for line in epilog.splitlines()[1:] if line[:6].strip().isdigit()]
    assert codes == [0, 1, 2, 3, 64, 65, 78, 130]
    assert max(len(line) for line in epilog.splitlines()) <= 100
    assert "   64  usage: a bad command line, or no run of the named variant" in epilog


def test_bad_input_data_exits_65(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = base_and_variant(tmp_path)
    run_dir = write_run(tmp_path / "runs", base)
    base.inputs_path.write_text("not json\n")
    assert main(["score", str(run_dir)]) == 65
    # the inputs manifest no longer matches the run: named, one line
    assert capsys.readouterr().err.startswith(f"lbeval score: error: {base.inputs_path}:sha256: ")


def test_an_interrupted_run_says_what_was_kept_and_how_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])
    out = tmp_path / "runs"
    with FakeServer() as fake:
        argv = ["run", "--variant", "v", "--inputs", str(inputs), "--base-url", fake.base_url]
        argv += ["--out", str(out), "--passes", "cold,warm", "--quiet", "--scenarios", "cache"]
        assert main(argv) == 0  # 2 inputs x (cold, warm) = 4 records
        run_dir = next((out / "v").glob("run-*"))
        capsys.readouterr()

        def interrupt(args: argparse.Namespace, *rest: object) -> int:
            raise KeyboardInterrupt

        monkeypatch.setattr(run_command, "execute_run", interrupt)
        assert main(argv) == 130
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "lbeval run: interrupted",
        f"lbeval run: 4 records kept in {run_dir}",
        "lbeval run: re-run to resume (the complete records are kept, the rest sent): the same command",
    ]


def test_resume_command_is_the_lbeval_command_line() -> None:
    assert resume_command(["/x/.venv/bin/lbeval", "run", "--variant", "a b"]) == "lbeval run --variant 'a b'"
    assert resume_command(["/r/eval/cli.py", "run", "--out", "o"]) == "python -m eval.cli run --out o"
    assert resume_command(["/x/pytest", "-q"]) == "the same command"


def test_an_interrupted_demo_counts_each_runs_records(tmp_path: Path) -> None:
    inputs = write_rows(tmp_path / "demo" / "inputs.jsonl", [make_row(0)])
    args = argparse.Namespace(out=tmp_path / "demo", base="b", variant="v")
    resume = "demo: `make demo` (or the same python -m eval.demo command) again resumes"
    assert interrupted_lines(args) == [resume]
    # where the demo's lbeval ab session writes the run of b (lbeval ab's default run id)
    folder = tmp_path / "demo" / "runs" / "b" / f"ab-{inputs_digest(inputs)[:12]}"
    folder.mkdir(parents=True)
    (folder / "records.jsonl").write_text("")
    assert interrupted_lines(args) == [f"demo: b: 0 records kept in {folder}", resume]
