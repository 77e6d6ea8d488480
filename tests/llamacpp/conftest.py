"""End-to-end tests against a real second server: llama-cpp-python (`cpu-smollm2-llamacpp` in
eval/serve/variants.toml), marked `llamacpp`.

They run by default (`make test`, CI). The session builds the server first with `make server-llamacpp`
(instant when its venv and GGUF exist; on a fresh machine it compiles llama-cpp-python, measured at 4-6 minutes
on 2 cores), starts it once through lbeval's own eval.serve.process, and stops it at the end. A build that
fails fails the tests. `LBEVAL_SKIP_LLAMACPP=1` (or `LBEVAL_SKIP_REAL_SERVER=1`, which skips every real-server
test) skips them, and the test run then says so loudly at its start and its end (CI shows both lines).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import ManagedServer, start

ROOT = Path(__file__).resolve().parents[2]
SKIP_ENV = "LBEVAL_SKIP_LLAMACPP"
REAL_SKIP_ENV = "LBEVAL_SKIP_REAL_SERVER"
SPEC = "cpu-smollm2-llamacpp"
_SKIPPED = pytest.StashKey[int]()


def _set(name: str) -> bool:
    return os.environ.get(name, "").strip() not in ("", "0")


def skip_reason() -> str | None:
    """Why the llamacpp tests are skipped (None: they run). LBEVAL_SKIP_REAL_SERVER=1 skips them too."""
    for name in (SKIP_ENV, REAL_SKIP_ENV):
        if _set(name):
            return f"{name}={os.environ[name]}"
    return None


def skipping() -> bool:
    return skip_reason() is not None


def pytest_report_header(config: pytest.Config) -> str:
    if skipping():
        return f"llama-cpp-python tests: SKIPPED ({skip_reason()})"
    return (
        f"llama-cpp-python tests: on (`{SPEC}`, built by make server-llamacpp, started once for the session)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not skipping():
        return
    marker = pytest.mark.skip(reason=f"{skip_reason()}: end-to-end tests against llama-cpp-python skipped")
    chosen = [item for item in items if "llamacpp" in item.keywords]
    for item in chosen:
        item.add_marker(marker)
    config.stash[_SKIPPED] = len(chosen)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    skipped = config.stash.get(_SKIPPED, None)
    if skipped is not None:
        terminalreporter.write_sep(
            "!",
            f"LLAMA-CPP-PYTHON TESTS SKIPPED ({skip_reason()}): {skipped} end-to-end tests against a second "
            "server did not run (README: 'Servers other than vLLM' says how to run them)",
            red=True,
            bold=True,
        )


def build_server() -> float:
    """`make server-llamacpp` (skipped by its stamp when built); the seconds it took."""
    t0 = time.monotonic()
    proc = subprocess.run(
        ["make", "-C", str(ROOT), "--no-print-directory", "server-llamacpp"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"make server-llamacpp failed ({proc.returncode}):\n{proc.stdout[-4000:]}")
    return time.monotonic() - t0


@pytest.fixture(scope="session")
def llamacpp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedServer]:
    build_server()
    server = start(get_launch_spec(SPEC), log=tmp_path_factory.mktemp("llamacpp") / "server.log")
    try:
        yield server
    finally:
        server.stop()
