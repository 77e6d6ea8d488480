"""The skip switch and the build step shared by the suites that need a real server (tests/real_server/,
tests/llamacpp/): one definition of "skipped loudly" and of "built by make", so the two cannot drift.

A suite's conftest makes one `ServerSuite` and forwards pytest's three hooks to it. The suite's tests run by
default; any of its environment variables set to a value other than "" or "0" skips every test carrying its
marker, and the run then says so at its start (report header) and at its end (a red line).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ServerSuite:
    marker: str  # the pytest marker of the suite's tests
    label: str  # how the header and the summary name the suite, e.g. "real-server"
    on_header: str  # what the header says when the tests run
    skip_envs: tuple[str, ...]  # the first one set skips the suite
    skipped_what: str  # the end-of-run line: "<n> <skipped_what> did not run"
    key: pytest.StashKey[int]
    hint: str = ""  # appended to the end-of-run line, e.g. where the README says how to run them

    def skip_reason(self) -> str | None:
        for name in self.skip_envs:
            if os.environ.get(name, "").strip() not in ("", "0"):
                return f"{name}={os.environ[name]}"
        return None

    def report_header(self) -> str:
        reason = self.skip_reason()
        return (
            f"{self.label} tests: SKIPPED ({reason})"
            if reason
            else f"{self.label} tests: on ({self.on_header})"
        )

    def modify_items(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        reason = self.skip_reason()
        if reason is None:
            return
        marker = pytest.mark.skip(reason=f"{reason}: {self.skipped_what} skipped")
        chosen = [item for item in items if self.marker in item.keywords]
        for item in chosen:
            item.add_marker(marker)
        config.stash[self.key] = len(chosen)

    def terminal_summary(self, reporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        skipped = config.stash.get(self.key, None)
        if skipped is not None:
            line = (
                f"{self.label.upper()} TESTS SKIPPED ({self.skip_reason()}): {skipped} {self.skipped_what} "
                f"did not run{self.hint}"
            )
            reporter.write_sep("!", line, red=True, bold=True)


def make(*targets: str) -> float:
    """`make <targets>` in the repo (each target skips itself by its stamp when built); the seconds it took.
    A failed build fails the test that needed it, with the end of make's output."""
    t0 = time.monotonic()
    proc = subprocess.run(
        ["make", "-C", str(ROOT), "--no-print-directory", *targets],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"make {' '.join(targets)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}")
    return time.monotonic() - t0
