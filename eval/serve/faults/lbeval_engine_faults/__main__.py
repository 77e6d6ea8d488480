"""`python -m lbeval_engine_faults`: check every patch point against the pins; one line each, exit 1 if any moved."""

from __future__ import annotations

import sys

from .points import POINTS, PatchPointError, check


def main() -> int:
    bad = 0
    for point in POINTS:
        try:
            check(point)
        except PatchPointError as exc:
            bad += 1
            print(f"MOVED {point.name}: {exc.code}")
        else:
            print(f"ok {point.name}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
