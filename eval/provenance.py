"""Provenance for headers and manifests: lbeval version, git commit and dirty flag, package versions, host."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

from eval import __version__


def source_root() -> Path:
    return Path(__file__).resolve().parent.parent


def git_state(root: Path | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the lbeval checkout; (None, None) when it is not a git checkout."""
    root = root or source_root()

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=no")
    return commit.strip(), (None if status is None else bool(status.strip()))


def package_versions(
    names: tuple[str, ...] = ("openai", "httpx2", "huggingface_hub", "numpy"),
) -> dict[str, str]:
    versions: dict[str, str] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def lbeval_version() -> str:
    return __version__


def host_info() -> dict[str, str]:
    return {"hostname": platform.node(), "platform": platform.platform(), "python": platform.python_version()}
