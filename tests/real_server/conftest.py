"""End-to-end tests against the real embedded vLLM CPU server (`cpu-smollm2` in eval/serve/variants.toml).

They run by default (`make test`, CI). `LBEVAL_SKIP_REAL_SERVER=1` skips them, and the test run then says so
loudly at its start and its end. The session starts the server once, through lbeval's own `eval.serve.process`,
after `make server-venv server-model` (instant when both exist; minutes on a fresh machine), and stops it
(its own process group) at the end.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval.serve.launch_specs import LaunchSpec, get_launch_spec
from eval.serve.process import ManagedServer, start
from tests.server_switch import ROOT, ServerSuite, make

SKIP_ENV = "LBEVAL_SKIP_REAL_SERVER"
SPEC = "cpu-smollm2"
SUITE = ServerSuite(
    marker="real_server",
    label="real-server",
    on_header=f"vLLM CPU server `{SPEC}`, started once for the session",
    skip_envs=(SKIP_ENV,),
    skipped_what="end-to-end tests against vLLM",
    key=pytest.StashKey[int](),
)
__all__ = ["ROOT", "SKIP_ENV", "SPEC", "RealServer"]


def pytest_report_header(config: pytest.Config) -> str:
    return SUITE.report_header()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    SUITE.modify_items(config, items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    SUITE.terminal_summary(terminalreporter, config)


def build_server() -> None:
    """`make server-venv server-model`: skipped by their stamps when the venv and the model exist."""
    make("server-venv", "server-model")


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
