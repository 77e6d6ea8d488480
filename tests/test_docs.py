"""The documentation is runnable: every command README.md, docs/ and bench/README.md show is run here against the
fake server (tests/support/fake_server.py) or listed in EXCLUDED with the reason, and every relative link resolves.

The convention (docs/development.md, "Documentation"): a command is a line starting with `$ ` inside a
```console fence (a line ending in `\\` continues on the next one); other lines of the fence are sample output
and are not checked. `$URL` is a running server's base URL (`$URL_A`, `$URL_B`: two of them); a comment
`# exit N` says the command is meant to exit N (default 0). A page's commands run in order, in one empty folder
of their own, with fresh fake servers. Shell commands in a ```sh, ```bash, ```shell or untagged fence fail a
test: they would be neither run nor excluded."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fake_server import FakeServer

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").rglob("*.md")])
LINKED_FILES = DOC_FILES  # every page whose links must resolve

# Pages other engineers are writing at the same time: linked already, checked as soon as they exist.
PENDING = frozenset({"docs/faults.md", "docs/gate.md", "docs/scenarios.md", "docs/timing.md"})


@dataclass(frozen=True)
class Exclusion:
    """Documented commands matching `pattern` (re.search) are deliberately not run, for `reason`."""

    pattern: str
    reason: str


REAL = "needs the embedded vLLM CPU server (minutes to build and start); tests/real_server/ covers it"
EXCLUDED = (
    Exclusion(r"^make (demo|bench|bench-aa)\b", "starts real vLLM CPU servers and takes minutes"),
    Exclusion(r"^make (test|check)\b", "the whole suite / the linters: the suite cannot run itself"),
    Exclusion(r"^make setup\b", "builds .venv, which this test is already running in"),
    Exclusion(
        r"^make (server-venv|server-model|server-llamacpp|server-hybrid|server-draft)\b",
        "downloads GBs, compiles for minutes, or builds a model in the server venv",
    ),
    Exclusion(r"^make (eval|ab|serve|cross-engine)\b", REAL + " (make starts a launch spec)"),
    Exclusion(
        r"^make (compare|gate)\b",
        "writes under the clone's runs/ folder; the lbeval compare and gate commands it runs are run from "
        "docs/reports.md and docs/gate-policy.md",
    ),
    Exclusion(r"--spec(-a|-b)? cpu-smollm2|--variant cpu-smollm2\b", REAL),
    Exclusion(r"^lbeval serve\b", REAL + " (serve waits for Ctrl-C)"),
    Exclusion(r"--specs my-variants\.toml", "a GPU machine's launch specs (two vLLM builds, 2 GPUs each)"),
    Exclusion(r"--tokenizer /models/", "a GPU machine's model folder"),
    Exclusion(
        r"--specs gpu-ab(-shared)?\.toml", "launch specs of vLLM servers on GPUs (docs/servers/gpu-ab.md)"
    ),
    Exclusion(r"^CUDA_VISIBLE_DEVICES=|127\.0\.0\.1:800[01]/v1 --base-url-b", "vLLM servers on a GPU box"),
    Exclusion(r"^lbeval prepare --datasets", "downloads LongBench from the Hugging Face Hub"),
    Exclusion(r"^python -m bench\b", "a measurement (bench/): minutes, and some need the CPU server"),
    Exclusion(r"^bash \.ci/run\b", "CI from a fresh clone: about 16 minutes with real servers"),
    Exclusion(r"^\.venv/bin/python -m pytest\b", "runs tests: the suite cannot run itself"),
)

FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)")
SHELLISH = re.compile(r"^\s*(\$ |lbeval |make |python |\.venv/|bash |rm |cd |\. )")
EXPECT = re.compile(r"#\s*exit (\d+)\b")


@dataclass(frozen=True)
class Command:
    path: str  # relative to the repository
    line: int  # 1-based line of the `$ `
    text: str  # continuation lines joined

    @property
    def expected_exit(self) -> int:
        found = EXPECT.search(self.text)
        return int(found.group(1)) if found else 0

    def excluded_by(self) -> Exclusion | None:
        return next((e for e in EXCLUDED if re.search(e.pattern, self.text)), None)


@dataclass(frozen=True)
class Fence:
    path: str
    line: int  # 1-based line of the opening fence
    lang: str
    body: tuple[str, ...]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def fences(path: Path) -> Iterator[Fence]:
    yield from fences_of_text(path.read_text(encoding="utf-8"), rel(path))


def fences_of_text(text: str, name: str) -> Iterator[Fence]:
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i])
            i += 1
        yield Fence(name, start + 1, opened.group(2).lower(), tuple(body))
        i += 1


def commands_of(fence: Fence) -> Iterator[Command]:
    pending: list[str] = []
    first = 0
    for offset, line in enumerate(fence.body):
        if not pending and not line.startswith("$ "):
            continue  # sample output
        if not pending:
            first = fence.line + 1 + offset
            line = line[2:]
        pending.append(line)
        if not line.endswith("\\"):
            yield Command(fence.path, first, "\n".join(pending))
            pending = []
    if pending:
        yield Command(fence.path, first, "\n".join(pending))


def all_commands(path: Path) -> list[Command]:
    return [c for f in fences(path) if f.lang == "console" for c in commands_of(f)]


def test_doc_files_found() -> None:
    names = {rel(p) for p in DOC_FILES}
    assert {"README.md", "bench/README.md", "docs/data.md", "docs/ab.md"} <= names


@pytest.mark.parametrize("path", DOC_FILES, ids=rel)
def test_shell_commands_are_in_console_fences(path: Path) -> None:
    """A command shown any other way would be neither run nor excluded."""
    bad = []
    for fence in fences(path):
        if fence.lang == "console":
            if not any(line.startswith("$ ") for line in fence.body):
                bad.append(f"{fence.path}:{fence.line}: a console fence without a `$ ` command")
        elif fence.lang in ("", "sh", "bash", "shell", "zsh") and any(SHELLISH.match(x) for x in fence.body):
            bad.append(
                f"{fence.path}:{fence.line}: shell commands in a ```{fence.lang} fence; use ```console and `$ `"
            )
    assert not bad, "\n".join(bad)


def test_every_exclusion_excludes_a_documented_command() -> None:
    commands = [c for p in DOC_FILES for c in all_commands(p)]
    unused = [e.pattern for e in EXCLUDED if not any(re.search(e.pattern, c.text) for c in commands)]
    assert not unused, f"exclusions matching no documented command (remove them): {unused}"


def test_the_convention_is_parsed_as_documented(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n```console\n$ lbeval a \\\n    --b\noutput line\n$ lbeval gate x y   # exit 2: no verdict\n```\n"
        "```toml\n[x]\n```\n",
        encoding="utf-8",
    )
    fenced = list(fences_of_text(page.read_text(encoding="utf-8"), "page.md"))
    assert [f.lang for f in fenced] == ["console", "toml"]
    found = list(commands_of(fenced[0]))
    assert [(c.line, c.text, c.expected_exit) for c in found] == [
        (3, "lbeval a \\\n    --b", 0),
        (6, "lbeval gate x y   # exit 2: no verdict", 2),
    ]


def run_env(tmp: Path, urls: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LBEVAL_")}
    env.update(urls)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HF_HUB_OFFLINE"] = "1"
    env["LBEVAL_CACHE"] = str(tmp / "cache")  # never the shared server venv and model
    env["HOME"] = str(tmp)
    env["NO_COLOR"] = "1"
    return env


RUNNABLE = [p for p in DOC_FILES if any(c.excluded_by() is None for c in all_commands(p))]


@pytest.mark.parametrize("path", RUNNABLE, ids=rel)
def test_documented_commands_run(path: Path, tmp_path: Path) -> None:
    """Each page's commands, in order, in an empty folder, against two fresh fake servers."""
    work = tmp_path / "work"
    work.mkdir()
    with FakeServer() as a, FakeServer() as b:
        env = run_env(tmp_path, {"URL": a.base_url, "URL_A": a.base_url, "URL_B": b.base_url})
        for command in all_commands(path):
            if command.excluded_by() is not None:
                continue
            done = subprocess.run(
                ["bash", "-c", command.text],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,  # a hang guard, not a timing assertion
                check=False,
            )
            where = f"{command.path}:{command.line}: $ {command.text}"
            tail = f"\n--- stdout ---\n{done.stdout[-2000:]}\n--- stderr ---\n{done.stderr[-2000:]}"
            assert done.returncode == command.expected_exit, f"{where}\nexit {done.returncode}{tail}"
            assert "Traceback" not in done.stderr, f"{where}\na traceback{tail}"


# links ------------------------------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`]*`")


def prose(path: Path) -> list[tuple[int, str]]:
    """The lines outside fences, with inline code removed (links are not links there)."""
    out, inside = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            out.append((number, CODE_SPAN.sub("", line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    text = CODE_SPAN.sub(lambda m: m.group(0)[1:-1], heading.strip().lstrip("#").strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line) for _, line in prose_with_code(path) if line.startswith("#")}


def prose_with_code(path: Path) -> list[tuple[int, str]]:
    out, inside = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith("```"):
            inside = not inside
        elif not inside:
            out.append((number, line))
    return out


def broken_links(path: Path) -> Iterator[str]:
    for number, line in prose(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http(s), mailto: not a repository path
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            name = resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else str(resolved)
            where = f"{rel(path)}:{number}: ({target})"
            if not resolved.exists():
                if name not in PENDING:
                    yield f"{where}: no file {name}"
                continue
            if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                yield f"{where}: no heading #{anchor} in {name}"


@pytest.mark.parametrize("path", LINKED_FILES, ids=rel)
def test_relative_links_resolve(path: Path) -> None:
    broken = list(broken_links(path))
    assert not broken, "\n".join(broken)


def test_link_checker_finds_a_broken_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Top part\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#top-part) [web](https://x.org/y) `[code](nowhere.md)`\n"
        "[missing](docs/b.md) [bad anchor](docs/a.md#other) [pending](docs/gate.md)\n",
        encoding="utf-8",
    )
    assert list(broken_links(page)) == [
        "README.md:2: (docs/b.md): no file docs/b.md",
        "README.md:2: (docs/a.md#other): no heading #other in docs/a.md",
    ]


def test_readme_is_a_front_door() -> None:
    """At most ~200 lines, no lists of test files, and every docs page reachable from it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 210
    assert not re.search(r"tests/\S*\.py", readme), "test files belong in docs/development.md, not the README"
    linked = {
        (ROOT / t.partition("#")[0]).resolve()
        for _, line in prose(ROOT / "README.md")
        for t in LINK.findall(line)
    }
    pages = [p for p in (ROOT / "docs").glob("*.md")]
    orphans = [rel(p) for p in pages if p.resolve() not in linked]
    assert not orphans, f"docs pages the README does not link: {orphans}"
    missing = [name for name in PENDING if (ROOT / name).resolve() not in linked]
    assert not missing, f"pending pages the README must link: {missing}"


ISSUE_NUMBER = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def test_no_issue_numbers_in_docs_or_code() -> None:
    """A reader of the project has no issue tracker to look numbers up in: docs and code say what they mean."""
    roots = [ROOT / d for d in ("eval", "scorers", "tests", "bench", "docs", "prompts")]
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / ".ci" / "run"]
    files += [p for r in roots for p in r.rglob("*") if p.suffix in (".py", ".md", ".toml") and p.is_file()]
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in files
        for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if ISSUE_NUMBER.search(line)
    ]
    assert not found, f"issue numbers: {found[:10]}"
