"""What a scenario unit is made of: `ScenarioStep`s (one record each), sent alone or together by batch.

A ScenarioStep extends the cache scenario's Step with what a scenario needs:
    prompt_row   the input whose prompt is sent (a filler's or noise request's), None: the unit's own input
    salt_key     "": a fresh salt of its own (cold); a name: the unit's salt of that name, made fresh by the
                 first step that uses it (cold) and shared by the later ones (warm)
    batch        steps of a unit with the same batch number (>= 0) are sent at the same moment; -1: alone
    token_ids    send these prompt token IDs to /v1/completions instead of the text (the hitlen scenario)
    shared       expect == "prefix": the prompt tokens primed before (L); the hit must be
                 floor(min(L, n-1)/block)*block, and one that is not is a finding, not an invalid record
    stop_from    the step (pass, repetition) whose output's last word becomes this request's stop string
    variation    RequestRecord.variation (what the request varied), as sorted (key, value) pairs
    replica      send it to this replica of the run (the replicas scenario), None: the unit's own replica
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval.prepare.inputs import InputRow
from eval.run.steps import Step, Unit

Variation = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class ScenarioStep(Step):
    prompt_row: int | None = None
    salt_key: str = ""
    batch: int = -1
    token_ids: tuple[int, ...] | None = None
    shared: int | None = None
    stop_from: tuple[str, int] | None = None
    variation: Variation = ()
    replica: int | None = None


def variation(**values: Any) -> Variation:
    return tuple(sorted(values.items()))


def scenario_step(
    pass_name: str, repetition: int, expect: str, vary: Mapping[str, Any], **kw: Any
) -> ScenarioStep:
    """A step that is never retried (scenario requests measure; a failed check is counted, not re-sent)."""
    return ScenarioStep(
        pass_name, repetition, salt="scenario", expect=expect, retry_invalid=False,
        variation=variation(**vary), **kw,
    )  # fmt: skip


def scenario_unit(row_index: int, kind: str, steps: Sequence[ScenarioStep]) -> Unit:
    return Unit(row_index, kind, 0, tuple(steps))


def steps_of(unit: Unit) -> list[ScenarioStep]:
    out = [s for s in unit.steps if isinstance(s, ScenarioStep)]
    if len(out) != len(unit.steps):
        raise TypeError(f"unit {unit.kind} of input {unit.row_index} holds steps that are not ScenarioSteps")
    return out


def key_name(row: InputRow) -> str:
    return f"{row.dataset}/{row.id}"


def prompt_length(row: InputRow) -> int:
    return row.prompt_tokens if row.prompt_tokens is not None else len(row.prompt.split())


def others(rows: Sequence[InputRow], index: int) -> list[int]:
    """The other inputs, shortest prompt first (the unit's own input when it is the only one)."""
    rest = [i for i in range(len(rows)) if i != index] or [index]
    return sorted(rest, key=lambda i: (prompt_length(rows[i]), i))


def spread(candidates: Sequence[int], count: int, offset: int = 0) -> list[int]:
    """`count` of the candidates spread evenly over their order (a mix of prompt lengths), cycling when there
    are fewer; `offset` rotates the choice so that inputs do not all get the same ones."""
    m = len(candidates)
    if count <= 0 or m == 0:
        return []
    if count >= m:
        return [candidates[(offset + k) % m] for k in range(count)]
    picks = [round(k * (m - 1) / max(count - 1, 1)) for k in range(count)]
    return [candidates[(p + offset) % m] for p in picks]
