"""Where a benchmark's rows come from (`lbeval prepare --source hub | --data-dir PATH | --source mini`), and the
one Hub download every benchmark's sources use (eval/benchmarks/*/sources.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eval.errors import DataError


@dataclass(frozen=True)
class DataSource:
    """Where rows come from: kind is "hub", "data_dir" (a folder or data.zip) or "mini". `repo` and `revision`
    override LongBench v1's Hub pin (None: the pin; LongBench v2 always reads its own)."""

    kind: str
    path: Path | None = None
    repo: str | None = None
    revision: str | None = None


Downloader = Callable[[str, str], Path]


def hub_file(repo: str, revision: str, filename: str, what: str) -> Path:
    """One file of a Hub dataset repository at a pinned revision (downloaded or from the Hub cache); offline
    without it in the cache: one DataError suggesting --data-dir or --source mini (`what` names the file)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(hf_hub_download(repo_id=repo, filename=filename, repo_type="dataset", revision=revision))
    except LocalEntryNotFoundError as exc:
        raise DataError(
            f"hf://datasets/{repo}@{revision}/{filename}",
            None,
            None,
            "not in the local Hugging Face cache and the Hub cannot be reached "
            f"(offline: {exc.__class__.__name__}). Copy {what} "
            "to this machine and pass --data-dir PATH, or use --source mini for the shipped sample.",
        ) from None
