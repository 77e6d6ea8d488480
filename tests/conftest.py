"""Shared test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


@pytest.fixture
def fixture_data_dir() -> Path:
    """A small LongBench-format folder (tests/data/longbench_fixture; not LongBench data)."""
    return DATA / "longbench_fixture"
