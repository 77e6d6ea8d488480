"""The typed parts of a run manifest (manifest.json): its settings, probe facts, sessions, stats and ab mark.

    RunSettings   `settings`: what a resume must match (sampling, passes, cold mode, the scenario plan)
    ProbeFacts    `probe`: what the probe found the server to be (eval/run/probe.ProbeResult, as written)
    RunStats      `stats`: the counts of the last session's end (records, final slots, by pass, counters)
    SessionEntry  each of `sessions`: one invocation's line (its server, outcome, replicas, lbeval ab side)
    PairingMark   `interleaved`: one side of an lbeval ab session and its pairing file's mark (ab_pairs.py)
    InputsHeaderFacts  `inputs_header`: the inputs manifest's header as the run read it (provenance)
    HostFacts     `host`: the client machine (hostname, platform, Python)
    ClientVersions  `client_versions`: the client's packages and their versions

Each is written by the run session (a session line also by the replicas' and ab's drivers) and read as
attributes everywhere else; a reader never supplies a default again: an absent key reads as the field's default
here (the runs of earlier lbeval versions, and sparse test manifests, load the same way). `from_dict` checks
every field's type and names the file and the field on damage (ManifestError, exit 2); `to_dict` is the JSON
written, so a run folder written before these types existed reads and rewrites with the same keys. Each part
carries the version of its shape (`part_version`, not written while it is the first: manifest.json's own
`schema_version` names the whole).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from eval.errors import DataError
from eval.prepare.inputs import HEADER_PARTS, InputsSource, InputsTemplates, InputsTokenizer, PartError
from eval.records.cache_model import CacheModel, cache_model_from_dict
from eval.records.codec import FieldError, check_fields
from eval.records.scenario_kinds.registry import registered

PARTS_VERSION = 1  # the shape of the parts below; a reader for an older shape goes beside it


class ManifestError(DataError):
    """A run manifest that cannot be read or holds a field of the wrong type: no result from this run (exit 2)."""

    exit_code = 2


def _check(obj: Any, cls: type, path: Path | str, where: str, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object `obj` (manifest field `where`) as `cls`'s keyword arguments: every key a field of `cls`
    and of its type (the `skip` ones are read by their own types); else ManifestError naming file and field."""
    if not isinstance(obj, Mapping):
        raise ManifestError(path, None, where, f"must be an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - {f.name for f in fields(cls) if f.name not in _NOT_WRITTEN})
    if unknown:
        raise ManifestError(path, None, f"{where}.{unknown[0]}", "unknown field")
    for f in fields(cls):
        if f.name not in obj and f.default is MISSING and f.default_factory is MISSING:
            raise ManifestError(path, None, f"{where}.{f.name}", "missing field")
    try:
        check_fields(dict(obj), cls, prefix=f"{where}.", skip=skip)
    except FieldError as exc:
        raise ManifestError(path, None, exc.field, str(exc).split(": ", 1)[1]) from None
    if obj.get("part_version", PARTS_VERSION) != PARTS_VERSION:
        raise ManifestError(path, None, f"{where}.part_version", f"this lbeval reads version {PARTS_VERSION}")
    return dict(obj)


# fields that are no key of their own: the keys a part was read with, a scenario's settings (flat)
_NOT_WRITTEN = ("present", "scenario_settings")


def _written(part: Any, always: bool = False, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """A part as JSON: every field set (not None; every field when `always`), the `keep` ones and those the
    part was read with (`present`) always, and no part_version while it is the first (the manifests written
    before the typed parts carry none)."""
    out = {}
    for f in fields(part):
        value = getattr(part, f.name)
        if f.name == "part_version":
            if value != 1:  # the first shape is the one written before parts had versions
                out[f.name] = value
        elif f.name == "present":
            continue
        elif always or value is not None or f.name in keep or f.name in getattr(part, "present", ()):
            out[f.name] = value
    return out


# --- settings -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSettings:
    """manifest.settings: what a resume must match (the operational ones, retries and the URL, are per session).

    None is "not in the manifest": a sampling setting not sent, a plan without that scenario."""

    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    top_logprobs: int | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    max_tokens_override: int | None = None
    return_tokens_as_token_ids: bool | None = None
    passes: list[str] | None = None  # the cache scenario's pass choices; None: every choice (PASS_CHOICES)
    timing_reps: int = 0  # the planned timing repetitions (0: none)
    cold_mode: str = "salt"
    concurrency: int = 1
    stream_all: bool = False
    endpoints: dict[str, str] | None = None
    # the scenario plan: None without scenarios beyond cache (scenarios) or without that scenario (the others)
    scenarios: list[str] | None = None
    batch_sizes: list[int] | None = None
    repeats: int | None = None
    hit_lengths: list[int] | None = None
    hit_budget: int | None = None
    hit_classes: list[str] | None = None
    scenario_inputs: int | None = None  # how many inputs run the scenarios beyond cache (None: every input)
    scenario_max_tokens: int | None = None
    server_fields: dict[str, Any] | None = None  # what the server kind needs in every request (absent: vLLM)
    # the settings of a registered scenario not named above: its module declares them (ScenarioSpec.settings),
    # so a new scenario's setting needs no field here; written flat beside the others, read by their scenario
    scenario_settings: dict[str, Any] = field(default_factory=dict)
    part_version: int = PARTS_VERSION
    # the keys it was read with, written back even when null (`"seed": null`, `"hit_lengths": null`)
    present: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, obj: Any, path: Path | str = "manifest.json") -> RunSettings:
        declared = _declared_settings() - {f.name for f in fields(cls)}
        theirs = {k: v for k, v in obj.items() if k in declared} if isinstance(obj, Mapping) else {}
        raw = _check(
            {k: v for k, v in obj.items() if k not in theirs} if theirs else obj, cls, path, "settings"
        )
        out = cls(**raw, scenario_settings=theirs, present=frozenset(raw))
        for name in ("timing_reps", "concurrency", "repeats", "hit_budget", "scenario_inputs"):
            value = getattr(out, name)
            if value is not None and value < (1 if name == "concurrency" else 0):
                raise ManifestError(path, None, f"settings.{name}", f"must not be {value}")
        return out

    def to_dict(self) -> dict[str, Any]:
        out = _written(self, keep=("timing_reps", "cold_mode", "concurrency", "stream_all"))
        theirs = out.pop("scenario_settings")
        return {**out, **theirs}

    def differences(self, other: RunSettings) -> list[tuple[str, Any, Any]]:
        """(key, mine, other's) for each setting the two differ in, by key; empty: the same settings."""
        a, b = self.to_dict(), other.to_dict()
        return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _declared_settings() -> set[str]:
    """The settings keys the registered scenarios declare (eval/records/scenario_kinds/)."""
    return {key for spec in registered() for key in spec.settings}


# --- probe ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CapabilityFacts:
    """One capability the probe checked (eval/run/probe.Capability, as written)."""

    ok: bool | None  # None: not checked
    required: bool
    detail: str
    fix: str = ""
    fault: bool = False
    part_version: int = PARTS_VERSION


@dataclass(frozen=True)
class ProbeFacts:
    """manifest.probe: what the probe found the server to be (eval/run/probe.ProbeResult's fields, as written;
    the defaults read a sparse or older probe). `cache_model` is what its prefix cache can hit
    (eval/records/cache_model.py); None before cache models, or when nothing about hits can be known."""

    model: str = ""
    model_ids: list[str] = field(default_factory=list)
    max_model_len: int | None = None
    version: str | None = None  # the server's
    metrics: bool = False
    prefix_caching: bool | None = None
    block_size: int | None = None
    cached_tokens_reported: bool = False
    top_logprobs: int = 20
    cache_hit_seen: bool | None = None
    salt_honored: bool | None = None
    reset_prefix_cache: bool | None = None
    tokenize: bool = False
    process_start_time: float | None = None
    finished_requests: float | None = None
    capabilities: dict[str, CapabilityFacts] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    server_kind: str = "vllm"
    server_label: str = "vLLM"
    server_evidence: str = ""
    server_info: dict[str, Any] = field(default_factory=dict)
    cold_mode: str = "salt"
    cold_method: str = ""
    cache_verification: str = "verified"  # "verified" | "unverified" (the server reports no cached tokens)
    request_fields: dict[str, Any] = field(default_factory=dict)
    cache_model: CacheModel | None = None
    part_version: int = PARTS_VERSION

    @classmethod
    def from_dict(cls, obj: Any, path: Path | str = "manifest.json") -> ProbeFacts:
        raw = _check(obj, cls, path, "probe", skip=("capabilities", "cache_model"))
        caps = raw.get("capabilities") or {}
        if not isinstance(caps, Mapping):
            raise ManifestError(
                path, None, "probe.capabilities", f"must be an object, got {type(caps).__name__}"
            )
        raw["capabilities"] = {
            name: CapabilityFacts(**_check(cap, CapabilityFacts, path, f"probe.capabilities.{name}"))
            for name, cap in caps.items()
        }
        try:
            raw["cache_model"] = cache_model_from_dict(raw.get("cache_model"), "probe")
        except ValueError as exc:
            raise ManifestError(path, None, "probe.cache_model", str(exc).split(": ", 1)[-1]) from None
        return cls(**raw)

    def to_dict(self) -> dict[str, Any]:
        """As eval/run/probe.ProbeResult.to_dict() writes it: every field, None ones too."""
        out = _written(self, always=True)
        out["capabilities"] = {k: _written(c, always=True) for k, c in self.capabilities.items()}
        model = self.cache_model
        out["cache_model"] = (
            None if model is None else {f.name: getattr(model, f.name) for f in fields(model)}
        )
        return out


# --- stats ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunStats:
    """manifest.stats: the counts written as the last session ended (all zero before a session ended).

    `counters` are the session's named counts beside these (reprimes, group_restarts, evictions,
    cached_tokens_mismatch, foreign_figures, ...: eval/run/passes.py), written flat beside the others."""

    records: int = 0  # record lines written, every attempt (0: not counted; damage() then checks none lost)
    slots_final: int = 0  # slots with a final record (eval/records/final.select_final)
    by_pass: dict[str, dict[str, int]] = field(default_factory=dict)  # pass -> status -> final records
    invalid_attempts: dict[str, int] = field(default_factory=dict)  # pass -> first attempts marked invalid
    transport_retries: int = 0
    duplicate_records: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    part_version: int = PARTS_VERSION

    @classmethod
    def from_dict(cls, obj: Any, path: Path | str = "manifest.json") -> RunStats:
        if not isinstance(obj, Mapping):
            raise ManifestError(path, None, "stats", f"must be an object, got {type(obj).__name__}")
        named = {f.name for f in fields(cls)} - {"counters"}
        counters = {k: v for k, v in obj.items() if k not in named}
        for key, value in counters.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise ManifestError(path, None, f"stats.{key}", f"must be int, got {type(value).__name__}")
        raw = _check({k: v for k, v in obj.items() if k in named}, cls, path, "stats")
        return cls(**raw, counters=counters)

    def to_dict(self) -> dict[str, Any]:
        out = _written(self, always=True)
        counters = out.pop("counters")
        return {**out, **dict(sorted(counters.items()))}

    def counter(self, name: str) -> int:
        """A session counter (0 when the session counted none)."""
        return self.counters.get(name, 0)

    @property
    def errors(self) -> int:
        """Final records whose status is error, over every pass."""
        return sum(p.get("error", 0) for p in self.by_pass.values())


# --- sessions -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaEntry:
    """One replica of a session that ran on several (eval/run/replicas.py); `pin`: the header that routes a
    request to its data-parallel rank (a routing endpoint's replicas share one URL)."""

    replica: int
    base_url: str
    server_version: str | None = None
    server_process_start_time: float | None = None
    pin: dict[str, str] | None = None
    part_version: int = PARTS_VERSION


@dataclass(frozen=True)
class AbEntry:
    """The session was side `side` of an lbeval ab session, with the seed of its pairs' order and its partner."""

    side: str
    seed: int
    partner: str
    part_version: int = PARTS_VERSION


# the keys a session line (a replica's) has had since it was first written (None ones too); others once set
_REPLICA_START = ("replica", "base_url", "server_version", "server_process_start_time")
_SESSION_START = (
    "started_at", "base_url", "server_version", "server_process_start_time", "records_on_disk", "units_to_run",
    "torn_lines_dropped", "retry", "timeout_s", "quiet", "launch_spec", "numerics",
)  # fmt: skip


@dataclass(frozen=True)
class SessionEntry:
    """One line of manifest.sessions: one invocation on the run folder (a resume appends one). Written as the
    session starts, completed as it ends (`ended_at`, `outcome`, `records_written`); `replicas`, `dp_ranks` and
    `ab` only for a session on several replicas, on data-parallel ranks, or as one side of lbeval ab."""

    started_at: str = ""
    base_url: str = ""
    server_version: str | None = None
    server_process_start_time: float | None = None
    records_on_disk: int = 0
    units_to_run: int = 0
    torn_lines_dropped: int = 0
    retry: dict[str, Any] = field(default_factory=dict)  # the RetryPolicy of the session
    timeout_s: float | None = None
    quiet: bool = False
    launch_spec: str | None = None  # the launch spec given, and the numerics change it declares (or "")
    numerics: str = ""
    ended_at: str | None = None
    outcome: str | None = None  # "complete", "interrupted", "stopped: ..." (None: the session did not end)
    records_written: int | None = None
    replicas: list[ReplicaEntry] | None = None
    dp_ranks: int | None = None
    ab: AbEntry | None = None
    part_version: int = PARTS_VERSION

    @classmethod
    def from_dict(cls, obj: Any, path: Path | str = "manifest.json", index: int = 0) -> SessionEntry:
        where = f"sessions.{index}"
        raw = _check(obj, cls, path, where, skip=("replicas", "ab"))
        replicas = raw.get("replicas")
        if replicas is not None:
            if not isinstance(replicas, list):
                raise ManifestError(
                    path, None, f"{where}.replicas", f"must be a list, got {type(replicas).__name__}"
                )
            raw["replicas"] = [
                ReplicaEntry(**_check(r, ReplicaEntry, path, f"{where}.replicas.{i}"))
                for i, r in enumerate(replicas)
            ]
        if raw.get("ab") is not None:
            raw["ab"] = AbEntry(**_check(raw["ab"], AbEntry, path, f"{where}.ab"))
        return cls(**raw)

    def to_dict(self) -> dict[str, Any]:
        out = _written(self, keep=_SESSION_START)
        if self.replicas is not None:
            out["replicas"] = [_written(r, keep=_REPLICA_START) for r in self.replicas]
        if self.ab is not None:
            out["ab"] = _written(self.ab)
        return out


# --- provenance: the inputs header, the host, the client's packages --------------------------------------------


def _as_read(part: Any, out: dict[str, Any]) -> dict[str, Any]:
    """`out` (every field of `part`) cut to the keys `part` was read with, when it was read (`present`)."""
    return out if part.present is None else {k: v for k, v in out.items() if k in part.present}


@dataclass(frozen=True)
class InputsHeaderFacts:
    """manifest.inputs_header: the header of the inputs manifest the run was made from (eval/prepare/inputs.py's
    InputsHeader, as written: provenance, not what is asked, which `inputs_sha256` names). The defaults read a
    sparse or older one; it is written back with the keys it was read with."""

    source: InputsSource = field(
        default_factory=InputsSource
    )  # where the data came from (hub, data_dir, mini)
    seed: int | None = None
    n: int | None = None  # rows asked per dataset (None: all)
    datasets: list[str] = field(default_factory=list)
    selected_ids: dict[str, list[str]] = field(default_factory=dict)
    templates: InputsTemplates = field(default_factory=InputsTemplates)
    tokenizer: InputsTokenizer = field(default_factory=InputsTokenizer)
    max_input_tokens: dict[str, int] | None = None
    max_tokens: dict[str, int] = field(default_factory=dict)
    lbeval_version: str | None = None  # the lbeval that prepared the inputs
    git_commit: str | None = None
    git_dirty: bool | None = None
    schema_version: int | None = None  # the inputs manifest's
    extra: dict[str, Any] = field(default_factory=dict)
    n_taken: dict[str, int] = field(default_factory=dict)  # rows taken per dataset (empty: not recorded)
    n_available: dict[str, int] = field(default_factory=dict)
    part_version: int = PARTS_VERSION
    present: frozenset[str] | None = field(default=None, compare=False, repr=False)  # None: every field

    @classmethod
    def from_dict(cls, obj: Any, path: Path | str = "manifest.json") -> InputsHeaderFacts:
        """The header as the run manifest holds it; its parts are the inputs manifest's own (eval/prepare/inputs.py),
        a damaged field of one is a ManifestError naming it (`inputs_header.source.files.qasper.rows`)."""
        raw = _check(obj, cls, path, "inputs_header", skip=tuple(HEADER_PARTS))
        try:
            typed = {
                name: part.from_dict(raw[name], name) for name, part in HEADER_PARTS.items() if name in raw
            }
        except PartError as exc:
            raise ManifestError(path, None, f"inputs_header.{exc.field}", exc.why) from None
        return cls(**{**raw, **typed}, present=frozenset(raw))

    def to_dict(self) -> dict[str, Any]:
        parts = {name: getattr(self, name).to_dict() for name in HEADER_PARTS}
        written = {**_written(self, always=True), **parts}
        return _as_read(self, written)

    @property
    def inputs_taken(self) -> int | None:
        """The inputs taken over every dataset (None: the header does not say)."""
        return sum(self.n_taken.values()) if self.n_taken else None


@dataclass(frozen=True)
class HostFacts:
    """manifest.host: the machine the client ran on (eval/provenance.host_info), as of the latest session."""

    hostname: str = ""
    platform: str = ""
    python: str = ""
    part_version: int = PARTS_VERSION
    present: frozenset[str] | None = field(default=None, compare=False, repr=False)  # None: every field

    @classmethod
    def from_dict(cls, obj: Any, path: Path | str = "manifest.json") -> HostFacts:
        raw = _check(obj, cls, path, "host")
        return cls(**raw, present=frozenset(raw))

    def to_dict(self) -> dict[str, Any]:
        return _as_read(self, _written(self, always=True))


@dataclass(frozen=True)
class ClientVersions:
    """manifest.client_versions: the version of each client package (eval/provenance.package_versions; "not
    installed" for one that is not), as of the latest session; written flat, package -> version."""

    packages: dict[str, str] = field(default_factory=dict)
    part_version: int = PARTS_VERSION

    @classmethod
    def from_dict(cls, obj: Any, path: Path | str = "manifest.json") -> ClientVersions:
        if not isinstance(obj, Mapping):
            raise ManifestError(path, None, "client_versions", f"must be an object, got {type(obj).__name__}")
        for name, version in obj.items():
            if not isinstance(version, str):
                raise ManifestError(
                    path, None, f"client_versions.{name}", f"must be str, got {type(version).__name__}"
                )
        return cls(packages=dict(obj))

    def to_dict(self) -> dict[str, str]:
        return dict(self.packages)

    def version_of(self, package: str) -> str | None:
        """The version recorded for `package` (None: not recorded)."""
        return self.packages.get(package)


# --- interleaved ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairingMark:
    """`RunManifest.interleaved`: this run was side `side` of an lbeval ab session with run `partner`; when the
    session last ended its pairing file held `pairs` lines whose sha256 is `pairs_sha256` (eval/records/ab_pairs.py
    checks the file against it)."""

    ab_id: str
    side: str  # "a" | "b"
    partner: str  # "<variant>/<run_id>" of the other side
    pairs: int
    pairs_sha256: str

    @classmethod
    def from_dict(cls, obj: Any, path: Path | str = "manifest.json") -> PairingMark:
        raw = _check(obj, cls, path, "interleaved")
        if set(raw) != {f.name for f in fields(cls)} or raw["side"] not in ("a", "b") or raw["pairs"] < 0:
            raise ManifestError(path, None, "interleaved", f"not a pairing mark: {obj!r:.80}")
        return cls(**raw)

    def to_dict(self) -> dict[str, Any]:
        return _written(self, always=True)
