"""The one builder of the inputs header the test fixtures write (runfactory, v2runfactory, fake_fixtures and the
inputs manifest's own tests): each gives only the fields its header has of its own."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from eval.prepare.inputs import InputsHeader, InputsSource, InputsTemplates, InputsTokenizer


def inputs_header(**overrides: Any) -> InputsHeader:
    """A header of the "test" source with no tokenizer, no templates and no budgets, for qasper with every row
    and no output limits; `overrides` set any InputsHeader field (an unknown name is a TypeError)."""
    header = InputsHeader(
        source=InputsSource(kind="test"),
        seed=1,
        n=None,
        datasets=["qasper"],
        selected_ids={},
        templates=InputsTemplates(),
        tokenizer=InputsTokenizer(kind="none"),
        max_input_tokens=None,
        max_tokens={},
        lbeval_version="0.1.0",
        git_commit=None,
        git_dirty=None,
    )
    return replace(header, **overrides)
