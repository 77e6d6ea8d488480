"""Fixtures and helpers for runner tests: a fake server per test and small inputs manifests.

Import the fixtures into a test module (`from tests.eval.fake_fixtures import fake_fixture`): it provides the
fixture named `fake`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.prepare.inputs import InputRow, InputsHeader, sha256_text, write_inputs
from eval.run.config import endpoints
from eval.run.request import RequestSettings
from eval.run.retry import RetryPolicy
from eval.run.runner import RunConfig
from tests.eval.headers import inputs_header
from tests.support.fake_server import FakeServer

FAST_RETRY = RetryPolicy(retries=2, backoff_s=0.01, max_backoff_s=0.02)


def make_row(i: int, *, dataset: str = "qasper", mode: str = "chat", words: int = 60, **kw: Any) -> InputRow:
    """A prompt of `words` distinct words (one fake token each) that names its example."""
    body = " ".join(f"ex{i}w{j}" for j in range(words))
    prompt = f"Example ex{i}: {body}\n\n Question: what is ex{i}?\n\nAnswer:"
    row = InputRow(
        dataset=dataset,
        id=f"ex{i}",
        prompt=prompt,
        mode=mode,
        max_tokens=6,
        prompt_sha256=sha256_text(prompt),
        prompt_tokens=None,
        truncated=False,
        answers=[f"answer {i}"],
        all_classes=None,
        length=words,
    )
    return replace(row, **kw)


def make_header(**kw: Any) -> InputsHeader:
    return inputs_header(**{"max_tokens": {"qasper": 6}, "lbeval_version": "test", **kw})


def write_rows(path: Path, rows: list[InputRow]) -> Path:
    write_inputs(path, make_header(), rows)
    return path


@pytest.fixture(name="fake")
def fake_fixture() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def config_for(server: FakeServer, inputs: Path, out: Path, **kw: Any) -> RunConfig:
    base = RunConfig(
        variant="v1",
        inputs=inputs,
        topology=endpoints(server.base_url),
        out=out,
        timing_reps=2,
        retry=FAST_RETRY,
        quiet=True,
        request=RequestSettings(seed=3),
        metrics_wait_s=0.5,
    )
    return replace(base, **kw)
