"""Test support: a loaded benchmark swapped, for one test, for a copy without its entry in one stage's slot."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from eval import benchmark_registry as registry
from eval.benchmark_registry import Slot, benchmarks


def without_entry(monkeypatch: pytest.MonkeyPatch, name: str, slot: Slot[Any]) -> None:
    """Until the test ends, the loaded benchmark `name` has no entry in `slot`."""
    loaded = next(b for b in benchmarks() if b.name == name)
    copy = replace(loaded, hooks=tuple(h for h in loaded.hooks if h.slot is not slot))
    monkeypatch.setitem(registry.REGISTRY._loaded, name, copy)
