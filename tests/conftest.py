"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eval.benchmarks.plugins import load_benchmarks

load_benchmarks()  # tests call the stages directly, not through the command layer that loads the benchmarks
ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


@pytest.fixture
def fixture_data_dir() -> Path:
    """A small LongBench-format folder (tests/data/longbench_fixture; not LongBench data)."""
    return DATA / "longbench_fixture"


@pytest.fixture(autouse=True, scope="session")
def _loopback_never_through_a_proxy() -> None:
    """The fake servers listen on loopback; lbeval's client honours HTTP(S)_PROXY (and NO_PROXY), so a proxy
    the machine's environment names must not carry the tests' requests: loopback is added to NO_PROXY."""
    if any(os.environ.get(v) for v in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy")):
        for name in ("NO_PROXY", "no_proxy"):
            os.environ[name] = ",".join(filter(None, [os.environ.get(name), "127.0.0.1", "localhost", "::1"]))
