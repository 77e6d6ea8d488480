"""End-to-end tests against a real second server: llama-cpp-python (`cpu-smollm2-llamacpp` in
eval/serve/variants.toml), marked `llamacpp`.

They run by default (`make test`, CI). The session builds the server first with `make server-llamacpp`
(instant when its venv and GGUF exist; on a fresh machine it compiles llama-cpp-python, measured at 4-6 minutes
on 2 cores), starts it once through lbeval's own eval.serve.process, and stops it at the end. A build that
fails fails the tests. `LBEVAL_SKIP_LLAMACPP=1` (or `LBEVAL_SKIP_REAL_SERVER=1`, which skips every real-server
test) skips them, and the test run then says so loudly at its start and its end (CI shows both lines).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import ManagedServer, start
from tests.server_switch import ROOT, ServerSuite, make

SPEC = "cpu-smollm2-llamacpp"
SUITE = ServerSuite(
    marker="llamacpp",
    label="llama-cpp-python",
    on_header=f"`{SPEC}`, built by make server-llamacpp, started once for the session",
    skip_envs=("LBEVAL_SKIP_LLAMACPP", "LBEVAL_SKIP_REAL_SERVER"),  # skipping every real server skips it too
    skipped_what="end-to-end tests against llama-cpp-python",
    key=pytest.StashKey[int](),
    hint=" (README: 'Servers other than vLLM' says how to run them)",
)
__all__ = ["ROOT", "SPEC"]


def pytest_report_header(config: pytest.Config) -> str:
    return SUITE.report_header()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    SUITE.modify_items(config, items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    SUITE.terminal_summary(terminalreporter, config)


def build_server() -> float:
    """`make server-llamacpp` (skipped by its stamp when built); the seconds it took."""
    return make("server-llamacpp")


@pytest.fixture(scope="session")
def llamacpp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedServer]:
    build_server()
    server = start(get_launch_spec(SPEC), log=tmp_path_factory.mktemp("llamacpp") / "server.log")
    try:
        yield server
    finally:
        server.stop()
