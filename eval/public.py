"""A stage package's public face: the names other packages may import from it, re-exported lazily.

Each package's `__init__.py` names its public names by the module that defines them and binds `__all__` and a
module `__getattr__` from them:

    __all__, __getattr__ = public_face(__name__, {"types": ("RequestRecord", "Usage"), "final": ("select_final",)})

`__all__` is the package's contract (tests/eval/test_architecture.py: a module of another package imports only
these names, written either `from eval.records.types import RequestRecord` or `from eval.records import
RequestRecord`). Importing the package imports none of its modules: `eval.records.RequestRecord` imports
`eval.records.types` on first use, so a light module never pulls in its package's heavy ones (the HTTP client,
numpy) and a package's `__init__` can never close an import circle.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def public_face(
    package: str, homes: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], object]]:
    """(`__all__`, the module `__getattr__`) of `package` from {module under the package: its public names}."""
    home_of: dict[str, str] = {}
    for module, names in homes.items():
        for name in names:
            if name in home_of:
                raise ValueError(f"{package}: {name} is public in both {home_of[name]} and {module}")
            home_of[name] = module

    def getattr_(name: str) -> object:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return list(home_of), getattr_
