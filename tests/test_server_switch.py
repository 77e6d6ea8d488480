"""The shared skip switch of the real-server suites (tests/server_switch.py)."""

from __future__ import annotations

import pytest

from tests.server_switch import ROOT, ServerSuite

pytest_plugins = ["pytester"]


def _suite() -> ServerSuite:
    return ServerSuite(
        "slowsrv", "slow-server", "started once", ("SKIP_A", "SKIP_B"), "slow tests", pytest.StashKey[int]()
    )


@pytest.mark.parametrize(
    ("env", "reason"),
    [({}, None), ({"SKIP_A": "0"}, None), ({"SKIP_A": " "}, None), ({"SKIP_A": "1"}, "SKIP_A=1"),
     ({"SKIP_B": "yes"}, "SKIP_B=yes"), ({"SKIP_A": "0", "SKIP_B": "1"}, "SKIP_B=1")],
)  # fmt: skip
def test_the_first_variable_set_to_other_than_empty_or_0_is_the_reason(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], reason: str | None
) -> None:
    for name in ("SKIP_A", "SKIP_B"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    suite = _suite()
    assert suite.skip_reason() == reason
    assert suite.report_header() == (
        "slow-server tests: on (started once)" if reason is None else f"slow-server tests: SKIPPED ({reason})"
    )


def test_only_the_marked_tests_are_skipped_and_the_end_of_the_run_says_how_many(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKIP_A", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the subprocess imports tests.server_switch from this repo
    pytester.makeconftest(
        """
import pytest
from tests.server_switch import ServerSuite
SUITE = ServerSuite("slowsrv", "slow-server", "on", ("SKIP_A",), "slow tests", pytest.StashKey[int]())
def pytest_configure(config):
    config.addinivalue_line("markers", "slowsrv: needs the slow server")
def pytest_collection_modifyitems(config, items):
    SUITE.modify_items(config, items)
def pytest_terminal_summary(terminalreporter, config):
    SUITE.terminal_summary(terminalreporter, config)
"""
    )
    pytester.makepyfile(
        """
import pytest
@pytest.mark.slowsrv
def test_a(): assert False
@pytest.mark.slowsrv
def test_b(): assert False
def test_c(): assert True
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--rootdir={pytester.path}")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*SLOW-SERVER TESTS SKIPPED (SKIP_A=1): 2 slow tests did not run*"])
