"""Prometheus text exposition (vLLM's /metrics): parsing, and counter/histogram deltas between two scrapes.

Only what lbeval reads is kept by default (the `vllm:` metrics and `process_start_time_seconds`); values of
the same metric with different labels (engines, finished reasons) are summed unless a label filter is given.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from eval.records.server_figures import (
    FINISHED_KEY,
    OBSERVATIONS_DIFFER_KEY,
    REQUESTS_KEY,
    SPEC_ACCEPTED_KEY,
    SPEC_DRAFT_TOKENS_KEY,
    SPEC_DRAFTS_KEY,
    SPEC_POSITION_PREFIX,
)

# the histograms whose per-request deltas a record keeps, by record key
REQUEST_HISTOGRAMS = {
    "prefill_time_s": "vllm:request_prefill_time_seconds",
    "queue_time_s": "vllm:request_queue_time_seconds",
    "ttft_s": "vllm:time_to_first_token_seconds",
}
# counters a record keeps, by record key
REQUEST_COUNTERS = {
    "prefix_cache_queries": "vllm:prefix_cache_queries",
    "prefix_cache_hits": "vllm:prefix_cache_hits",
    # speculative decoding (a server with --speculative-config; absent otherwise): eval/analyze/spec_decode.py
    SPEC_DRAFTS_KEY: "vllm:spec_decode_num_drafts",
    SPEC_DRAFT_TOKENS_KEY: "vllm:spec_decode_num_draft_tokens",
    SPEC_ACCEPTED_KEY: "vllm:spec_decode_num_accepted_tokens",
}
# accepted draft tokens by draft position (label `position`): record keys SPEC_POSITION_PREFIX + position
SPEC_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
CACHE_CONFIG_INFO = "vllm:cache_config_info"
FINISHED_COUNTER = "vllm:request_success"  # finished requests (summed over finished_reason)
PROCESS_START = "process_start_time_seconds"

_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

Labels = tuple[tuple[str, str], ...]


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _ESCAPES[m.group(0)], value) if "\\" in value else value


def _parse_labels(text: str) -> Labels:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            raise ValueError(f"bad label set {{{text}}}")
        out.append((m.group(1), _unescape(m.group(2))))
        pos = m.end()
    return tuple(out)


def _parse_value(text: str) -> float:
    special = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}
    return special[text] if text in special else float(text)


@dataclass(frozen=True)
class Snapshot:
    """One scrape: metric sample name -> list of (labels, value)."""

    samples: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)

    def values(self, name: str, **match: str) -> list[float]:
        return [
            v for labels, v in self.samples.get(name, ()) if all((k, x) in labels for k, x in match.items())
        ]

    def total(self, name: str, **match: str) -> float | None:
        """Sum over label sets; None when the metric is absent."""
        vals = self.values(name, **match)
        return math.fsum(vals) if vals else None

    def counter(self, name: str) -> float | None:
        """A counter by its base name (prometheus_client exposes `<name>_total`)."""
        value = self.total(name + "_total")
        return value if value is not None else self.total(name)

    def shape(self) -> dict[str, list[Labels]]:
        """Sample name -> its label sets (sorted), without the values: what two scrapes must share to be
        read the same way."""
        return {name: sorted(labels for labels, _ in entries) for name, entries in self.samples.items()}

    def info_labels(self, name: str) -> dict[str, str] | None:
        """Labels of an info-style gauge such as vllm:cache_config_info (the first label set)."""
        entries = self.samples.get(name)
        return dict(entries[0][0]) if entries else None


def _watched_names() -> frozenset[str]:
    counters = (*REQUEST_COUNTERS.values(), FINISHED_COUNTER)
    histograms = tuple(REQUEST_HISTOGRAMS.values())
    counters += (SPEC_PER_POSITION,)
    return frozenset(
        (PROCESS_START, *counters, *(c + "_total" for c in counters))
        + tuple(h + part for h in histograms for part in ("_count", "_sum"))
    )


# the samples `request_deltas`, `went_backwards` and the finished count read: what a per-request scrape keeps
# (a vLLM /metrics text is ~600 lines, most of them histogram buckets; parsing only these takes a fraction)
WATCHED_SAMPLES = _watched_names()


def _sample_name(line: str) -> str:
    """The sample's name: what precedes its labels' "{" or, without labels, the first space."""
    brace, space = line.find("{"), line.find(" ")
    return line[: brace if brace != -1 and (space == -1 or brace < space) else space]


def parse_metrics(
    text: str,
    prefixes: tuple[str, ...] | None = ("vllm:", PROCESS_START),
    names: frozenset[str] | None = None,
) -> Snapshot:
    """Parse exposition text; keep samples whose name starts with one of `prefixes` (None: keep all) and, when
    `names` is given, is one of them."""
    samples: dict[str, list[tuple[Labels, float]]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] == "#":
            continue
        if prefixes is not None and not line.startswith(prefixes):
            continue
        name = _sample_name(line)
        if names is not None and name not in names:
            continue
        try:
            if line.startswith("{", len(name)):
                end = line.rindex("}")
                labels, rest = _parse_labels(line[len(name) + 1 : end]), line[end + 1 :]
            else:
                labels, rest = (), line[len(name) :]
            value = _parse_value(rest.split()[0])
        except (ValueError, IndexError) as exc:
            raise ValueError(f"/metrics line {lineno}: cannot parse {raw[:120]!r} ({exc})") from None
        samples.setdefault(name, []).append((labels, value))
    return Snapshot(samples)


def counter_delta(before: Snapshot, after: Snapshot, name: str) -> float | None:
    a, b = before.counter(name), after.counter(name)
    return None if a is None or b is None else b - a


@dataclass(frozen=True)
class HistogramDelta:
    count: float
    sum: float


def histogram_delta(before: Snapshot, after: Snapshot, name: str) -> HistogramDelta | None:
    counts = (before.total(name + "_count"), after.total(name + "_count"))
    sums = (before.total(name + "_sum"), after.total(name + "_sum"))
    if None in counts or None in sums:
        return None
    return HistogramDelta(count=counts[1] - counts[0], sum=sums[1] - sums[0])  # type: ignore[operator]


def went_backwards(before: Snapshot, after: Snapshot) -> bool:
    """True when the server restarted between the scrapes: its start time changed or a counter decreased."""
    s0, s1 = before.total(PROCESS_START), after.total(PROCESS_START)
    if s0 is not None and s1 is not None and s0 != s1:
        return True
    for name in (*REQUEST_COUNTERS.values(), "vllm:request_success"):
        d = counter_delta(before, after, name)
        if d is not None and d < 0:
            return True
    return any(
        (h := histogram_delta(before, after, name)) is not None and h.count < 0
        for name in REQUEST_HISTOGRAMS.values()
    )


def request_deltas(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """What one request changed, for a record's server_metrics (only meaningful at concurrency 1).

    Histogram sums are kept only when exactly one observation was added (`requests` says how many were;
    `observations_differ` is 1 when the histograms moved by different counts); `finished` is the
    finished-requests counter's delta. eval/records/server_figures.figure_check reads them: are these deltas the
    request's own?"""
    out: dict[str, float] = {}
    requests: float | None = None
    for key, name in REQUEST_HISTOGRAMS.items():
        h = histogram_delta(before, after, name)
        if h is None:
            continue
        if requests is not None and h.count != requests:
            out[OBSERVATIONS_DIFFER_KEY] = 1.0
        requests = h.count if requests is None else requests
        if h.count == 1:
            out[key] = h.sum
    for key, name in REQUEST_COUNTERS.items():
        d = counter_delta(before, after, name)
        if d is not None:
            out[key] = d
    if requests is not None:
        out[REQUESTS_KEY] = requests
    finished = counter_delta(before, after, FINISHED_COUNTER)
    if finished is not None:
        out[FINISHED_KEY] = finished
    out.update(position_deltas(before, after))
    return out


def position_deltas(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """Accepted draft tokens by draft position over a window: {SPEC_POSITION_PREFIX + position: delta}."""
    out: dict[str, float] = {}
    for name in (SPEC_PER_POSITION + "_total", SPEC_PER_POSITION):
        positions = {dict(labels).get("position") for labels, _ in after.samples.get(name, [])}
        for pos in sorted(p for p in positions if p is not None and p.isdigit()):
            a, b = before.total(name, position=pos), after.total(name, position=pos)
            if a is not None and b is not None:
                out[SPEC_POSITION_PREFIX + pos] = b - a
        if out:
            return out
    return out


# --- per engine (vLLM data parallel behind one endpoint: every engine's series carries an `engine` label) ------

ENGINE_LABEL = "engine"


def engine_names(snap: Snapshot) -> list[str]:
    """The `engine` label values the snapshot has, in numeric order ("0", "1", ...; others after, sorted)."""
    found = {
        v
        for entries in snap.samples.values()
        for labels, _ in entries
        for k, v in labels
        if k == ENGINE_LABEL
    }
    return sorted(found, key=lambda e: (not e.isdigit(), int(e) if e.isdigit() else 0, e))


def engine_view(snap: Snapshot, engine: str) -> Snapshot:
    """The snapshot as one engine sees it: the series labelled `engine=<engine>`, and those without an engine
    label (the API server's process_start_time_seconds); other engines' series are left out."""
    out: dict[str, list[tuple[Labels, float]]] = {}
    for name, entries in snap.samples.items():
        kept = [(labels, v) for labels, v in entries if dict(labels).get(ENGINE_LABEL, engine) == engine]
        if kept:
            out[name] = kept
    return Snapshot(out)


def engine_deltas(before: Snapshot, after: Snapshot, name: str) -> dict[str, float]:
    """A counter's delta on every engine both scrapes show (engine -> delta)."""
    out: dict[str, float] = {}
    for engine in engine_names(after):
        d = counter_delta(engine_view(before, engine), engine_view(after, engine), name)
        if d is not None:
            out[engine] = d
    return out
