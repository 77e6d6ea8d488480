"""Every scenario unit of a run (after the cache scenario's), and where a scenario unit resumes.

One unit per (input, scenario), scenario by scenario in SCENARIO_NAMES order, inputs in manifest order (only the
inputs `scenario_inputs` picks when `--scenario-inputs K` is given). The hitlen planner needs each input's
prompt token IDs, read from the server's /tokenize when the run is planned (so a resumed run plans the same
units from the same tokenizer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from eval.errors import ConfigError, LbevalError
from eval.prepare.inputs import InputRow
from eval.records.cache_model import CacheModel
from eval.records.final import select_final
from eval.records.scenarios import scenario_inputs
from eval.records.types import RequestRecord
from eval.records.vocabulary import SCENARIO_PASSES
from eval.run.client import Client
from eval.run.passes import GroupState
from eval.run.probe import ProbeResult
from eval.run.reply import RequestFailed
from eval.run.request import RequestSettings
from eval.run.scenarios.base import ScenarioStep, scenario_unit
from eval.run.scenarios.batch import plan_batch
from eval.run.scenarios.hitlen import plan_hitlen, prompt_token_ids
from eval.run.scenarios.repeats import plan_repeats
from eval.run.scenarios.replicas import plan_replicas
from eval.run.scenarios.settings import ScenarioSettings
from eval.run.scenarios.traffic import plan_traffic
from eval.run.steps import Unit


def is_scenario_unit(unit: Unit) -> bool:
    return unit.kind in SCENARIO_PASSES


def fetch_token_ids(
    s: ScenarioSettings,
    rows: Sequence[InputRow],
    client: Client,
    probe: ProbeResult,
    request: RequestSettings,
) -> dict[int, list[int]]:
    """Prompt token IDs of the inputs the hitlen scenario runs on ({} without it)."""
    if "hitlen" not in s.scenarios:
        return {}
    if not probe.tokenize:
        raise ConfigError("--scenarios hitlen needs the server's POST /tokenize (it sends exact token IDs)")
    keys = [r.key for r in rows]
    try:
        return {
            i: prompt_token_ids(client, probe.model, rows[i], request.chat_template_kwargs)
            for i in scenario_inputs(keys, s.inputs)
        }
    except RequestFailed as exc:
        raise LbevalError(f"--scenarios hitlen: {exc.message}") from None


def plan_scenario_units(
    s: ScenarioSettings,
    rows: Sequence[InputRow],
    *,
    token_ids: Mapping[int, Sequence[int]],
    cache_model: CacheModel | None,
    max_tokens_override: int | None,
    replicas: int = 1,
) -> list[Unit]:
    """`replicas`: the run's replica count (the replicas scenario plans nothing on one; named, it refuses)."""
    chosen = scenario_inputs([r.key for r in rows], s.inputs)
    units: list[Unit] = []
    if "replicas" in s.extra and replicas < 2 and not s.default_plan:
        raise ConfigError(
            "--scenarios replicas needs 2 or more replicas (--base-url repeated, or a launch spec with "
            "replicas = N); this run has one"
        )
    for name in s.extra:
        if name == "replicas" and replicas < 2:
            continue  # the default plan on one replica: nothing to compare
        for i in chosen:
            steps: list[ScenarioStep]
            if name == "batch":
                steps = plan_batch(rows, i, s.batch_sizes, s.max_tokens)
            elif name == "hitlen":
                if cache_model is None:
                    raise ConfigError(
                        "--scenarios hitlen needs the server's block size (vllm:cache_config_info in /metrics)"
                    )
                steps = plan_hitlen(
                    token_ids[i], cache_model, s.hit_budget, s.hit_lengths, s.max_tokens, s.hit_classes
                )
            elif name == "repeats":
                steps = plan_repeats(s.repeats, s.max_tokens)
            elif name == "replicas":
                steps = plan_replicas(replicas, s.max_tokens)
            elif name == "traffic":
                steps = plan_traffic(rows, i, s.max_tokens, max_tokens_override)
            else:
                raise ValueError(f"no planner for scenario {name!r}")
            units.append(scenario_unit(i, name, steps))
    return units


def scenario_resume_point(
    unit: Unit, records: list[RequestRecord], same_server: bool
) -> tuple[GroupState, int] | None:
    """None when the unit is complete (every step has a final record that is not an error); else it starts
    again from its first request as the next group (its records so far stay on disk, superseded): a scenario
    unit's requests only mean something when sent back to back."""
    if not records:
        return GroupState(group=0), 0
    finals = {(s.pass_name, s.repetition): r for s, r in select_final(records).final.items()}
    done = all(
        (f := finals.get((step.pass_name, step.repetition))) is not None and f.status != "error"
        for step in unit.steps
    )
    if done:
        return None
    return GroupState(group=max(r.group for r in records) + 1), 0
