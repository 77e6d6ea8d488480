"""What an interrupted `lbeval run` leaves behind, said in two lines: the records kept and how to resume.

The run folder is the one the runner uses (`out/<variant>/<run id>`, the run id by default derived from the
inputs file: eval.run.config.default_run_id); re-running the same command resumes it.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from eval.errors import LbevalError
from eval.prepare.inputs import inputs_digest
from eval.records.run_folder import RECORDS_NAME, scan_records
from eval.run.config import default_run_id


def resume_command(argv: Sequence[str] | None = None) -> str:
    """The command line that resumes: this process's own, when it is the `lbeval` console command."""
    argv = list(sys.argv if argv is None else argv)
    if argv and Path(argv[0]).name == "lbeval":
        return shlex.join(["lbeval", *argv[1:]])
    if argv and Path(argv[0]).parts[-2:] == ("eval", "cli.py"):  # python -m eval.cli
        return shlex.join(["python", "-m", "eval.cli", *argv[1:]])
    return "the same command"


def run_dir_for(out: Path, variant: str, inputs: Path, run_id: str | None = None) -> Path | None:
    """The folder `lbeval run` writes for these arguments (None: the inputs cannot be read)."""
    try:
        return out / variant / (run_id or default_run_id(inputs_digest(inputs)))
    except (OSError, LbevalError):
        return None


def records_kept(run_dir: Path) -> int:
    """Readable records in the run folder (a torn last line is not one)."""
    return len(scan_records(run_dir / RECORDS_NAME, with_topk=False).records)


def resume_lines(
    out: Path, variant: str, inputs: Path, run_id: str | None, argv: Sequence[str] | None = None
) -> list[str]:
    run_dir = run_dir_for(out, variant, inputs, run_id)
    if run_dir is None:
        return [f"nothing recorded (the inputs {inputs} could not be read)"]
    kept = records_kept(run_dir)
    if not kept:
        return [f"no record written yet in {run_dir}; re-run {resume_command(argv)} to start"]
    return [
        f"{kept} records kept in {run_dir}",
        f"re-run to resume (the complete records are kept, the rest sent): {resume_command(argv)}",
    ]
