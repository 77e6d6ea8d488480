"""Shared test fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eval.redact import forget_all

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


@pytest.fixture
def fixture_data_dir() -> Path:
    """A small LongBench-format folder (tests/data/longbench_fixture; not LongBench data)."""
    return DATA / "longbench_fixture"


@pytest.fixture(autouse=True)
def _forget_remembered_secrets() -> Iterator[None]:
    """Values a test's launch specs read from the environment are redacted in that test only."""
    yield
    forget_all()
