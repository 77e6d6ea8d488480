"""A later stage's own part of each scenario, by the scenario's name: analyze's row builder
(eval/analyze/attribution_rows.py), the report's plot function (eval/report/scenario_plots/kit.py). One rule for
them all: a part registers once, only under a registered scenario's name, and a scenario without one gets the
stage's default."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Generic, TypeVar

from eval.records.scenario_kinds.spec import is_registered, names

__all__ = ["ScenarioParts", "import_scenario_modules"]

P = TypeVar("P")


class ScenarioParts(Generic[P]):
    """Each scenario's part of one kind (`what`, e.g. "row builder"), or `default` for a scenario with none."""

    def __init__(self, what: str, default: P) -> None:
        self._what = what
        self._default = default
        self._parts: dict[str, P] = {}

    def register(self, name: str, part: P) -> P:
        """`part` under the scenario's name; a second one, or one of no registered scenario, is refused."""
        if not is_registered(name):
            raise ValueError(f"{self._what} {name!r}: no scenario of that name is registered")
        if name in self._parts:
            raise ValueError(f"scenario {name!r} has two {self._what}s")
        self._parts[name] = part
        return part

    def unregister(self, name: str) -> None:
        """Take a part away (a test's); KeyError when none has that name."""
        del self._parts[name]

    def of(self, name: str) -> P:
        """The scenario's part; the default when it registered none."""
        return self._parts.get(name, self._default)

    def names(self) -> tuple[str, ...]:
        """The scenarios with a part of their own, in the order they registered."""
        return tuple(self._parts)


def import_scenario_modules(package: str) -> tuple[str, ...]:
    """Import `package.<name>` for every registered scenario that has a module there (a later stage's part of
    it, registered when imported: its rows, its plots); the modules' names, in the registry's order."""
    found = tuple(
        f"{package}.{name}" for name in names() if importlib.util.find_spec(f"{package}.{name}") is not None
    )
    for module in found:
        importlib.import_module(module)
    return found
