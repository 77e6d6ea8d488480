"""Run every bench module: `python -m bench [name ...]`.

Each `bench/bench_<name>.py` exposes `main() -> None` and prints its own result lines.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    # the fault matrix (bench/faults.py): real servers and its own options, so never part of a plain `python -m bench`
    if argv[:1] == ["faults"]:
        return importlib.import_module("bench.faults").main(argv[1:])
    # the repeated real A/A sessions under load (bench/aa_sessions.py): likewise its own options and server
    if argv[:1] == ["aa-sessions"]:
        return importlib.import_module("bench.aa_sessions").main(argv[1:])
    # every candidate interval on real A/A sessions' pairs (bench/aa_methods.py): reads run folders
    if argv[:1] == ["aa-methods"]:
        return importlib.import_module("bench.aa_methods").main(argv[1:])
    # the timing rule's power in the real engine (bench/power_real.py): two real servers per session
    if argv[:1] == ["power-real"]:
        return importlib.import_module("bench.power_real").main(argv[1:])
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    wanted = [n for n in names if not argv or n.removeprefix("bench_") in argv]
    for name in wanted:
        print(f"== {name}", flush=True)
        importlib.import_module(f"bench.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
