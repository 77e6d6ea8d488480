"""What a run asks of the scenarios: which ones, batch sizes, repeats, hit lengths, and for which inputs.

`scenario_settings` is what the manifest records (a resume must match it); it is empty for the default (`cache`
only), so runs without scenarios keep the settings they always had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from eval.errors import ConfigError
from eval.records.scenarios import DEFAULT_BATCH_SIZES, DEFAULT_PLAN, DEFAULT_REPEATS, DEFAULT_SCENARIOS
from eval.records.vocabulary import CACHE_SCENARIO
from eval.run.client import Client
from eval.run.reply import RequestFailed
from eval.serve.launch_specs import flag_int


@dataclass(frozen=True)
class ScenarioSettings:
    scenarios: tuple[str, ...] = DEFAULT_SCENARIOS
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    repeats: int = DEFAULT_REPEATS
    hit_lengths: tuple[int, ...] | None = None  # None: from the block size (eval/run/scenarios/hitlen.py)
    # the chunked-prefill budget (max_num_batched_tokens) when known: its neighbours are hit lengths too
    hit_budget: int | None = None
    inputs: int | None = (
        None  # run the scenarios on this many inputs only (records/scenarios.scenario_inputs)
    )
    max_tokens: int | None = None  # output limit of scenario requests (None: the example's, or --max-tokens)
    # keep only these hitlen classes (None: all; the default plan's: records/scenarios.DEFAULT_PLAN)
    hit_classes: tuple[str, ...] | None = None
    # no scenario option named the scenarios (the default plan): on a server whose cold requests cannot use
    # cache_salt, the run keeps the cache passes alone (`fit_default_plan`) instead of refusing
    default_plan: bool = False

    @property
    def extra(self) -> tuple[str, ...]:
        """The scenarios other than cache."""
        return tuple(s for s in self.scenarios if s != CACHE_SCENARIO)

    @property
    def cache(self) -> bool:
        return CACHE_SCENARIO in self.scenarios


def validate_scenarios(s: ScenarioSettings, *, cold_mode: str) -> None:
    if not s.scenarios:
        raise ConfigError("--scenarios: give at least one scenario")
    if "batch" in s.scenarios and (not s.batch_sizes or min(s.batch_sizes) < 1):
        raise ConfigError("--batch-sizes: give batch sizes of at least 1, e.g. 1,4,8")
    if "batch" in s.scenarios and max(s.batch_sizes) > 64:
        raise ConfigError("--batch-sizes: at most 64 requests at once")
    if "repeats" in s.scenarios and not 2 <= s.repeats <= 1000:
        raise ConfigError("--repeats: between 2 and 1000")
    if s.hit_lengths is not None and (not s.hit_lengths or min(s.hit_lengths) < 1):
        raise ConfigError("--hit-lengths: give positive token counts, e.g. 127,128,129")
    if s.inputs is not None and s.inputs < 1:
        raise ConfigError("--scenario-inputs: at least 1")
    if s.max_tokens is not None and s.max_tokens < 1:
        raise ConfigError("--scenario-max-tokens: at least 1")
    if s.extra and cold_mode != "salt" and not s.default_plan:
        raise ConfigError(
            f"--scenarios {','.join(s.extra)} needs --cold salt: every request keeps its cache state by its salt"
        )


def scenario_settings(s: ScenarioSettings) -> dict[str, Any]:
    """The manifest settings of the scenarios; {} for the default (cache only)."""
    if s.scenarios == DEFAULT_SCENARIOS:
        return {}
    out: dict[str, Any] = {"scenarios": list(s.scenarios)}
    if "batch" in s.scenarios:
        out["batch_sizes"] = list(s.batch_sizes)
    if "repeats" in s.scenarios:
        out["repeats"] = s.repeats
    if "hitlen" in s.scenarios:
        out["hit_lengths"] = None if s.hit_lengths is None else list(s.hit_lengths)
        out["hit_budget"] = s.hit_budget
        if s.hit_classes is not None:  # absent from runs before the default plan (a resume compares these)
            out["hit_classes"] = list(s.hit_classes)
    if s.extra:
        out["scenario_inputs"] = s.inputs
        out["scenario_max_tokens"] = s.max_tokens
    return out


def sized_default_plan(s: ScenarioSettings, n_inputs: int) -> ScenarioSettings:
    """The default plan's scenario inputs for a run of `n_inputs` inputs (DEFAULT_PLAN.scenario_inputs), unless
    `--scenario-inputs` gave them."""
    if not s.default_plan or s.inputs is not None:
        return s
    return replace(s, inputs=DEFAULT_PLAN.scenario_inputs(n_inputs))


def fit_default_plan(
    s: ScenarioSettings, *, cold_mode: str, tokenize: bool, block_size: int | None
) -> tuple[ScenarioSettings, list[str]]:
    """The default plan (`s.default_plan`) as this server can run it, and a warning per scenario dropped: the
    scenarios beyond cache keep each request's cache state by its salt (any cold mode but salt: the cache
    passes alone), hitlen sends token IDs from POST /tokenize and needs the block size. Named scenarios are
    returned as they are (they refuse later, naming what is missing)."""
    if not s.default_plan or not s.extra:
        return s, []
    if cold_mode != "salt":
        why = f"need cold requests by cache_salt, and this run's cold requests use --cold {cold_mode}"
        return replace(s, scenarios=DEFAULT_SCENARIOS), [
            f"the default plan's scenarios {','.join(s.extra)} {why}: the cache passes only"
        ]
    if "hitlen" in s.scenarios and (not tokenize or block_size is None):
        missing = "POST /tokenize" if not tokenize else "the block size (vllm:cache_config_info)"
        kept = replace(s, scenarios=tuple(n for n in s.scenarios if n != "hitlen"))
        return kept, [f"the default plan's hitlen scenario needs {missing}, which this server lacks: not run"]
    return s, []


def parse_ints(text: str, what: str) -> tuple[int, ...]:
    """`--batch-sizes 1,4,8` -> (1, 4, 8), sorted, each once."""
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ConfigError(f"{what}: give a comma list of whole numbers, got {text!r}") from None
    if not values:
        raise ConfigError(f"{what}: give at least one number")
    return tuple(values)


def batched_tokens_budget(server_args: Sequence[str]) -> int | None:
    """`--max-num-batched-tokens N` (or `=N`) in a launch spec's server arguments, else None."""
    return flag_int(server_args, "--max-num-batched-tokens")


def server_budget(client: Client) -> int | None:
    """max_num_batched_tokens from vLLM's /server_info (served with VLLM_SERVER_DEV_MODE=1), else None."""
    try:
        info = client.get_json("/server_info?config_format=json")
    except (RequestFailed, ValueError):
        return None
    config = info.get("vllm_config") if isinstance(info, dict) else None
    scheduler = config.get("scheduler_config") if isinstance(config, dict) else None
    value = scheduler.get("max_num_batched_tokens") if isinstance(scheduler, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def resolve_budget(s: ScenarioSettings, client: Client) -> ScenarioSettings:
    """Fill hit_budget from the server when the hitlen scenario runs and the launch spec did not give it."""
    if "hitlen" not in s.scenarios or s.hit_budget is not None or s.hit_lengths is not None:
        return s
    return replace(s, hit_budget=server_budget(client))
