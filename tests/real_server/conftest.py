"""End-to-end tests against the real embedded vLLM CPU server (`cpu-smollm2` in eval/serve/variants.toml).

They run by default (`make test`, CI). `LBEVAL_SKIP_REAL_SERVER=1` skips them, and the test run then says so
loudly at its start and its end. The session starts the server once, through lbeval's own `eval.serve.process`,
after `make server-venv server-model` (instant when both exist; minutes on a fresh machine), and stops it
(its own process group) at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval.serve.launch_specs import LaunchSpec, get_launch_spec
from eval.serve.process import ManagedServer, start

ROOT = Path(__file__).resolve().parents[2]
SKIP_ENV = "LBEVAL_SKIP_REAL_SERVER"
SPEC = "cpu-smollm2"
_SKIPPED = pytest.StashKey[int]()


def skipping() -> bool:
    return os.environ.get(SKIP_ENV, "").strip() not in ("", "0")


def pytest_report_header(config: pytest.Config) -> str:
    if skipping():
        return f"real-server tests: SKIPPED ({SKIP_ENV}={os.environ[SKIP_ENV]})"
    return f"real-server tests: on (vLLM CPU server `{SPEC}`, started once for the session)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not skipping():
        return
    marker = pytest.mark.skip(reason=f"{SKIP_ENV}=1: end-to-end tests against vLLM skipped")
    chosen = [item for item in items if "real_server" in item.keywords]
    for item in chosen:
        item.add_marker(marker)
    config.stash[_SKIPPED] = len(chosen)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    skipped = config.stash.get(_SKIPPED, None)
    if skipped is not None:
        terminalreporter.write_sep(
            "!",
            f"REAL-SERVER TESTS SKIPPED ({SKIP_ENV}=1): {skipped} end-to-end tests against vLLM did not run",
            red=True,
            bold=True,
        )


def build_server() -> None:
    """`make server-venv server-model`: skipped by their stamps when the venv and the model exist."""
    proc = subprocess.run(
        ["make", "-C", str(ROOT), "--no-print-directory", "server-venv", "server-model"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"make server-venv server-model failed ({proc.returncode}):\n{proc.stdout[-4000:]}")


class RealServer:
    """The session's server; `kill()` and `restart()` let a test crash it and bring it back on the same port."""

    def __init__(self, spec: LaunchSpec, log: Path) -> None:
        self.spec, self.log = spec, log
        self.server: ManagedServer | None = None
        self.port: int | None = None
        self.starts: list[float] = []  # seconds to healthy, per start

    def start(self) -> None:
        self.server = start(self.spec, port=self.port, log=self.log)
        self.port = self.server.port
        self.starts.append(self.server.healthy_after_s or 0.0)

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return self.server.base_url

    def kill(self) -> None:
        """Crash it: SIGKILL to its process group (no graceful shutdown)."""
        assert self.server is not None
        os.killpg(self.server.pid, signal.SIGKILL)
        self.server.process.wait()
        self.server.stop()  # reaps what is left of the group

    def restart(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@pytest.fixture(scope="session")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    build_server()
    holder = RealServer(get_launch_spec(SPEC), tmp_path_factory.mktemp("vllm") / "server.log")
    holder.start()
    try:
        yield holder
    finally:
        holder.stop()
