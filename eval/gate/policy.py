"""Gate policies: the TOML file that says which rules the gate checks and with which thresholds.

The rules and their parameters are documented in the shipped default policy, eval/gate/policy_default.toml.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from eval.errors import ConfigError
from eval.serve.numerics import numerics_problem

POLICY_SCHEMA_VERSION = 1
DEFAULT_POLICY = "policy_default.toml"


@dataclass(frozen=True)
class Number:
    """A numeric parameter: its type (a TOML integer is accepted for a float) and its range, inclusive."""

    type: type
    what: str
    low: float = 0.0
    high: float = math.inf

    def problem(self, value: int | float) -> str | None:
        if not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if not self.low <= value <= self.high:
            return f"must be {self.what}, got {value!r}"
        return None


@dataclass(frozen=True)
class Text:
    """A string parameter: `check` says what is wrong with a value (None: nothing)."""

    type: type
    check: Callable[[str], str | None]

    def problem(self, value: str) -> str | None:
        return self.check(value)


COUNT = Number(int, "a count >= 0")
FRACTION = Number(float, "a fraction in [0, 1]", high=1.0)
POINTS = Number(float, "score points >= 0")
PERCENT = Number(float, "a percentage >= 0")
# a limit below the A/A floor could not be told from what two identical configurations show
AA_MULTIPLE = Number(float, "a multiple of the A/A floor in [1, 1000]", low=1.0, high=1000.0)
FACTOR = Number(float, "a factor >= 1", low=1.0)
DELTA = Number(float, "a logprob difference >= 0 (nats)")
# a declared numerics change, `numerics = "changed: REASON"` ("" none; eval/serve/numerics.py)
DECLARATION = Text(str, numerics_problem)
Kind = type | Number | Text
# the timing rules' parameters (eval/gate/rules.rule_prefill_change): the limit, the share of foreign figures,
# and whether runs that are not one interleaved session are skipped
TIMING_PARAMS: dict[str, tuple[Kind, Any]] = {
    "max_change_pct": (PERCENT, 10.0),
    "max_change_aa_multiple": (AA_MULTIPLE, None),
    "max_foreign_fraction": (FRACTION, 0.1),
    "interleaved_only": (bool, True),
}
# rule -> parameter -> (type, default); `enabled` is implicit
RULE_PARAMS: dict[str, dict[str, tuple[Kind, Any]]] = {
    "cold_warm_equality": {"allowed_drop": (COUNT, 0)},
    "warm_repeat_equality": {"min_fraction": (FRACTION, 1.0)},
    "cold_scores": {"tolerance_points": (POINTS, 0.5)},
    "no_invalid_warm": {
        "max": (COUNT, 0),
        "count_recovered": (bool, True),
        "runs": (list, ["base", "variant"]),
    },
    "no_errors": {"max": (COUNT, 0), "runs": (list, ["base", "variant"])},
    # max_change_pct's default applies unless the table states only max_change_aa_multiple (then there is no
    # absolute limit); both stated: the smaller limit (each must hold). eval/gate/rules.prefill_limit
    "warm_prefill_change": TIMING_PARAMS,
    "cold_prefill_change": TIMING_PARAMS,
    "cache_reports_consistent": {"max": (COUNT, 0), "runs": (list, ["base", "variant"])},
    # eval/gate/cross_numerics.py: per input within max(base noise x delta_factor, delta_floor), unless declared
    "cross_variant_cold": {
        "min_fraction": (FRACTION, 1.0),
        "delta_factor": (FACTOR, 10.0),
        "delta_floor": (DELTA, 0.01),
        "numerics": (DECLARATION, ""),
    },
    "hitlen_cache_honoured": {"max_misses": (COUNT, 0), "runs": (list, ["base", "variant"])},
    "batch_invariant": {
        "min_fraction": (FRACTION, 1.0),
        "include_warm": (bool, True),
        "bitwise": (bool, True),
    },
    "hitlen_equality": {"min_fraction": (FRACTION, 1.0)},
    "repeats_single_output": {"max_inputs": (COUNT, 0)},
    "traffic_invariant": {"min_fraction": (FRACTION, 1.0)},
    "cause_rows": {
        "allowed_drop": (COUNT, 0),
        "delta_factor": (FACTOR, 10.0),
        "delta_floor": (DELTA, 0.01),
        "skip_one_sided": (bool, False),
    },
    "cache_isolation": {"runs": (list, ["base", "variant"])},
}
DATA_PARAMS: dict[str, tuple[Kind, Any]] = {
    "require_complete": (bool, True),
    "min_valid_pair_fraction": (FRACTION, 0.9),
    "min_valid_pairs": (COUNT, 1),
    "accept_unverified_cache": (bool, False),
}


@dataclass(frozen=True)
class Policy:
    source: str
    data: dict[str, Any]
    rules: dict[str, dict[str, Any]]  # rules present in the file (enabled or not), parameters filled in


def _typed(where: str, value: Any, kind: Kind) -> Any:
    if isinstance(kind, (Number, Text)):
        value = _typed(where, value, kind.type)
        problem = kind.problem(value)
        if problem is not None:
            raise ConfigError(f"{where}: {problem}")
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is list:
        if not isinstance(value, list) or not all(v in ("base", "variant") for v in value) or not value:
            raise ConfigError(f'{where}: must be a non-empty list of "base" and/or "variant"')
        return list(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: must be {kind.__name__}, got {value!r}")
    return value


def _params(
    where: str, table: Any, spec: Mapping[str, tuple[Kind, Any]], extra: Sequence[str] = ()
) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = sorted(set(table) - set(spec) - set(extra))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted([*spec, *extra]))})")
    return {
        k: _typed(f"{where}.{k}", table[k], kind) if k in table else default
        for k, (kind, default) in spec.items()
    }


def parse_policy(text: str, source: str) -> Policy:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML ({exc})") from None
    except RecursionError:  # a value nested 100,000 deep: the parser's recursion, not a policy
        raise ConfigError(f"{source}: not a policy (a value nested too deeply to read)") from None
    except ValueError as exc:  # an integer of 5,000 digits: Python's limit on integer conversion
        raise ConfigError(
            f"{source}: not valid TOML (a number too long: {str(exc).split(';')[0][:100]})"
        ) from None
    unknown = sorted(set(doc) - {"schema_version", "data", "rules"})
    if unknown:
        raise ConfigError(f"{source}: {unknown[0]}: unknown key (known: schema_version, data, rules)")
    if doc.get("schema_version") != POLICY_SCHEMA_VERSION:
        raise ConfigError(
            f"{source}: schema_version must be {POLICY_SCHEMA_VERSION}, got {doc.get('schema_version')!r}"
        )
    data = _params(f"{source}: data", doc.get("data", {}), DATA_PARAMS)
    rules_doc = doc.get("rules", {})
    if not isinstance(rules_doc, dict):
        raise ConfigError(f"{source}: rules must be a table of rule tables")
    rules: dict[str, dict[str, Any]] = {}
    for name, table in rules_doc.items():
        if name not in RULE_PARAMS:
            raise ConfigError(f"{source}: rules.{name}: unknown rule (known: {', '.join(RULE_PARAMS)})")
        params = _params(f"{source}: rules.{name}", table, RULE_PARAMS[name], ["enabled"])
        params["enabled"] = _typed(f"{source}: rules.{name}.enabled", table.get("enabled", True), bool)
        if (
            name in ("warm_prefill_change", "cold_prefill_change")
            and "max_change_pct" not in table
            and "max_change_aa_multiple" in table
        ):
            params["max_change_pct"] = None  # only the A/A-relative limit stated: no absolute one
        rules[name] = params
    return Policy(source, data, rules)


def load_policy(path: Path | None) -> Policy:
    if path is None:
        text = resources.files("eval.gate").joinpath(DEFAULT_POLICY).read_text(encoding="utf-8")
        return parse_policy(text, f"eval/gate/{DEFAULT_POLICY}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the policy ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x}); a policy is UTF-8 TOML"
        ) from None
    return parse_policy(text, str(path))
