"""LongBench v1 dataset specs: template, metric, output limit and chat/raw mode for each of the 21 datasets.

The data lives in `prompts/` (official JSON files byte-for-byte, plus `datasets.toml`); this module
only reads it, on demand (nothing is read at import).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from eval.benchmark_registry import ListedDataset, Listing
from eval.errors import ConfigError

PROMPT_FILE = "dataset2prompt.json"
MAXLEN_FILE = "dataset2maxlen.json"
SPEC_FILE = "datasets.toml"
MODES = ("chat", "raw")
PROMPT_FILES = (PROMPT_FILE, MAXLEN_FILE, SPEC_FILE)  # under prompts/: the official two and lbeval's table
TEMPLATE_ORIGIN = "THUDM/LongBench LongBench/config @ 2e00731f"


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    template: str
    metric: str
    max_tokens: int
    mode: str  # "chat" | "raw"
    language: str
    first_line_only: bool = False
    stop_at_newline: bool = False

    def format(self, context: str, input: str) -> str:  # noqa: A002 - the official field name
        """The official prompt: `template.format(context=..., input=...)`."""
        return self.template.format(context=context, input=input)


def read_prompt_file(name: str) -> bytes:
    return resources.files("prompts").joinpath(name).read_bytes()


@lru_cache(maxsize=1)
def load_specs() -> dict[str, DatasetSpec]:
    templates: dict[str, str] = json.loads(read_prompt_file(PROMPT_FILE))
    limits: dict[str, int] = json.loads(read_prompt_file(MAXLEN_FILE))
    table: dict[str, dict[str, Any]] = tomllib.loads(read_prompt_file(SPEC_FILE).decode("utf-8"))
    specs: dict[str, DatasetSpec] = {}
    for name, entry in table.items():
        if name not in templates or name not in limits:
            raise ConfigError(f"prompts/{SPEC_FILE}: [{name}] has no template or output limit in prompts/")
        if entry.get("mode") not in MODES:
            raise ConfigError(f"prompts/{SPEC_FILE}: [{name}].mode must be one of {MODES}")
        specs[name] = DatasetSpec(
            name=name,
            template=templates[name],
            metric=str(entry["metric"]),
            max_tokens=int(limits[name]),
            mode=str(entry["mode"]),
            language=str(entry.get("language", "en")),
            first_line_only=bool(entry.get("first_line_only", False)),
            stop_at_newline=bool(entry.get("stop_at_newline", False)),
        )
    return specs


def is_v1(dataset: str) -> bool:
    """A LongBench v1 dataset (LongBench-E's `_e` names included)."""
    return base_name(dataset) in load_specs()


def base_name(dataset: str) -> str:
    """`qasper_e` (LongBench-E) -> `qasper`; other names unchanged."""
    return dataset[:-2] if dataset.endswith("_e") else dataset


def get_spec(dataset: str) -> DatasetSpec:
    specs = load_specs()
    spec = specs.get(base_name(dataset))
    if spec is None:
        raise unknown_dataset(dataset)
    return spec


def context_end(dataset: str) -> str:
    """The template's text between {context} and {input}: where a prompt's context ends ("" without one)."""
    after = get_spec(dataset).template.split("{context}", 1)
    return after[1].split("{input}", 1)[0] if len(after) == 2 else ""


def unknown_dataset(dataset: str) -> ConfigError:
    known = ", ".join(sorted(load_specs()))
    return ConfigError(f"unknown dataset {dataset!r}; known LongBench v1 datasets: {known}")


def listing() -> Listing:
    """What `lbeval datasets` lists of LongBench v1 (its entry in eval/benchmark_registry.LISTING): the datasets in
    prompts/datasets.toml order, and how LongBench-E's are named."""
    specs = load_specs()
    rows = tuple(
        ListedDataset(s.name, s.metric, s.max_tokens, s.mode, s.language, s.first_line_only)
        for s in specs.values()
    )
    return Listing(
        rows, (f"{len(specs)} datasets; LongBench-E variants are selected as <name>_e (e.g. qasper_e).",)
    )
