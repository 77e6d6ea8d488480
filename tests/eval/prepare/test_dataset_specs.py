"""prompts/ holds the official LongBench v1 templates and limits byte for byte."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from eval.benchmarks.longbench.spec import get_spec, load_specs

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT.parent / "shared" / "reference" / "longbench" / "v1" / "config"
# git blob ids recorded in prompts/PROVENANCE.md (upstream THUDM/LongBench @ 2e00731f)
BLOBS = {
    "dataset2prompt.json": "1c85f6bc0f0df4e42131aa49a867797ee7043ecf",
    "dataset2maxlen.json": "79d0d9990e5799c845ebcf839c1ee1a4ff14873e",
}
RAW = {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"}


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


@pytest.mark.parametrize("name", sorted(BLOBS))
def test_prompt_files_match_upstream_blob(name: str) -> None:
    assert git_blob_id((ROOT / "prompts" / name).read_bytes()) == BLOBS[name]


@pytest.mark.parametrize("name", sorted(BLOBS))
def test_prompt_files_match_shared_reference(name: str) -> None:
    ref = REFERENCE / name
    if not ref.exists():
        pytest.skip("../shared/reference not present")
    assert (ROOT / "prompts" / name).read_bytes() == ref.read_bytes()


def test_twenty_one_datasets_with_official_limits_and_modes() -> None:
    specs = load_specs()
    limits = json.loads((ROOT / "prompts" / "dataset2maxlen.json").read_text())
    assert len(specs) == 21
    assert set(specs) == set(limits)
    for name, spec in specs.items():
        assert spec.max_tokens == limits[name]
        assert spec.mode == ("raw" if name in RAW else "chat"), name
    assert (specs["qasper"].max_tokens, specs["gov_report"].max_tokens) == (128, 512)


def test_quirks_survive() -> None:
    assert "\n\n Answer" in get_spec("qasper").template
    assert "asconcisely" in get_spec("narrativeqa").template
    assert get_spec("lcc").template.endswith("Next line of code:\n")
    assert get_spec("samsum").stop_at_newline and get_spec("trec").first_line_only


def test_longbench_e_names_resolve_to_base_spec() -> None:
    assert get_spec("qasper_e") is get_spec("qasper")
    with pytest.raises(Exception, match="unknown dataset 'nope'"):
        get_spec("nope")


def test_format_is_str_format() -> None:
    spec = get_spec("qasper")
    raw = json.loads((ROOT / "prompts" / "dataset2prompt.json").read_text())["qasper"]
    assert spec.format(context="C {x}", input="Q") == raw.format(context="C {x}", input="Q")
