"""The progress bars of a session: one bar per pass on stderr (tqdm on a terminal, plain lines elsewhere), silent with --quiet."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from eval.records.types import RequestRecord
from eval.records.vocabulary import PROGRESS_GROUPS, choice_of
from eval.run.steps import Unit
from eval.terminal import printable, progress_bar


class Progress:
    """One tqdm bar per pass (ETA, errors, invalid samples); silent with --quiet."""

    def __init__(self, units: list[Unit], done: Counter[str], quiet: bool) -> None:
        totals: Counter[str] = Counter(choice_of(s.pass_name) for u in units for s in u.steps)
        self.bars: dict[str, Any] = {}
        self.errors: Counter[str] = Counter()
        self.invalid: Counter[str] = Counter()
        self._lock = threading.Lock()
        for pos, name in enumerate(b for b in PROGRESS_GROUPS if b in totals):
            self.bars[name] = progress_bar(
                total=totals[name], initial=done[name], desc=f"{name:8}", position=pos, disable=quiet
            )  # plain lines off a terminal

    def record(self, rec: RequestRecord, final: bool) -> None:
        name = choice_of(rec.pass_name)
        with self._lock:
            if rec.status == "error":
                self.errors[name] += 1
            elif rec.status == "invalid":
                self.invalid[name] += 1
            bar = self.bars[name]
            if final:
                bar.update(1)
            postfix = f"errors={self.errors[name]} invalid={self.invalid[name]}"
            bar.set_postfix_str(printable(postfix), refresh=final)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
