"""Gate policies: the TOML file that says which rules the gate checks and with which thresholds.

The rules and their parameters are documented in the shipped default policy, eval/gate/policy_default.toml; each
rule's parameters, their types and ranges are its own (eval/gate/ruleset/<rule>.py), read from the registry.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from eval.errors import ConfigError
from eval.gate.registry import rule, rules
from eval.gate.rule import COUNT, FRACTION, Kind, Number, Text

__all__ = [
    "DATA_PARAMS", "DEFAULT_POLICY", "POLICY_SCHEMA_VERSION", "RULE_PARAMS", "Number", "Policy", "Text",
    "load_policy", "parse_policy",
]  # fmt: skip

POLICY_SCHEMA_VERSION = 1
DEFAULT_POLICY = "policy_default.toml"


# rule -> parameter -> (kind, default), from the registry (each rule's module states its own); `enabled` is implicit
RULE_PARAMS: dict[str, dict[str, tuple[Kind, Any]]] = {r.name: dict(r.params) for r in rules()}
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


def _rule_params(source: str, name: str, table: Any) -> dict[str, Any]:
    """One rule's table: its parameters (the rule's own, defaults filled in) and `enabled`."""
    where, found = f"{source}: rules.{name}", rule(name)
    if found is None:
        raise ConfigError(f"{where}: unknown rule (known: {', '.join(r.name for r in rules())})")
    params = _params(where, table, found.params, ["enabled"])
    params["enabled"] = _typed(f"{where}.enabled", table.get("enabled", True), bool)
    return found.finish(table, params) if found.finish is not None else params


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
    known = {name: _rule_params(source, name, table) for name, table in rules_doc.items()}
    return Policy(source, data, known)


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
