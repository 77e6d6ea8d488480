"""Run every bench module: `python -m bench [name ...]`.

Each `bench/bench_<name>.py` exposes `main() -> None` and prints its own result lines.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable
from pathlib import Path

# the commands with their own options and servers, never part of a plain `python -m bench`: name -> module
COMMANDS = {
    "faults": "bench.faults",  # the fault matrix (real servers)
    "aa-sessions": "bench.aa_sessions",  # the repeated real A/A sessions under load
    "aa-methods": "bench.aa_methods",  # every candidate interval on real A/A sessions' pairs (reads run folders)
    "power-real": "bench.power_real",  # the timing rule's power in the real engine (two real servers a session)
}


def command(name: str) -> Callable[[list[str]], int]:
    """The main(argv) -> exit code of one of COMMANDS."""
    entry: Callable[[list[str]], int] = importlib.import_module(COMMANDS[name]).main
    return entry


def main(argv: list[str]) -> int:
    if argv[:1] and argv[0] in COMMANDS:
        return command(argv[0])(argv[1:])
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    wanted = [n for n in names if not argv or n.removeprefix("bench_") in argv]
    for name in wanted:
        print(f"== {name}", flush=True)
        importlib.import_module(f"bench.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
