"""The gate's rules, loaded: importing this module imports every module of eval/gate/ruleset/ whose name does
not start with "_" (those hold what several rules share), each of which registers its `Rule` (eval/gate/rule.py),
so a new rule is its module alone. `rules()` lists them in order, as the gate, the policy, JUnit, the report and
docs/gate.md do."""

from __future__ import annotations

import importlib
import pkgutil

from eval.gate import ruleset as _ruleset
from eval.gate.rule import Rule, registered, rule_named
from eval.terminal import echo

__all__ = ["RULESET", "listing", "rule", "rules"]

RULESET = _ruleset.__name__
for _module in pkgutil.iter_modules(_ruleset.__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{RULESET}.{_module.name}")


def rules() -> list[Rule]:
    """Every registered rule, in order."""
    return registered()


def rule(name: str) -> Rule | None:
    """The rule registered as `name` (None: no such rule)."""
    return rule_named(name)


def listing() -> list[str]:
    """One line per registered rule: its name, what it checks and its module."""
    return [f"{r.name:26} {r.what} ({r.judge.__module__})" for r in rules()]


if __name__ == "__main__":
    echo("\n".join(listing()))
