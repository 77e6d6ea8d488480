"""prompts/v2/ holds the official LongBench v2 templates byte for byte (git blob ids, ../shared copy)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
V2 = ROOT / "prompts" / "v2"
REFERENCE = ROOT.parent / "shared" / "reference" / "longbench" / "v2" / "prompts"
# git blob ids recorded in prompts/v2/PROVENANCE.md (upstream THUDM/LongBench @ 2e00731f, prompts/<name>)
BLOBS = {
    "0shot.txt": "81ad9bc1e85ad7ba5b4780fe0fa87745f4bfd964",
    "0shot_cot.txt": "372d217b0d77778428092b01e93ad9a8274c366c",
    "0shot_cot_ans.txt": "06318c5f9c3d4426122ab226b345aa8ce0fad471",
    "0shot_no_context.txt": "c891fbb9910e63ecf9aee270a002b0c389fe4801",
    "0shot_rag.txt": "1d963b551a7a733172898e0d5f6f2ced54368d31",
}


def git_blob_id(data: bytes) -> str:
    """What `git hash-object` prints for a file with these bytes."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # `printf '' | git hash-object --stdin` and `printf 'hello\n' | git hash-object --stdin`
        (b"", "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"),
        (b"hello\n", "ce013625030ba8dba906f756967f9e9ca394464a"),
    ],
)
def test_git_blob_id_is_what_git_computes(data: bytes, expected: str) -> None:
    assert git_blob_id(data) == expected


@pytest.mark.parametrize("name", sorted(BLOBS))
def test_v2_template_matches_upstream_blob(name: str) -> None:
    assert git_blob_id((V2 / name).read_bytes()) == BLOBS[name]


@pytest.mark.parametrize("name", sorted(BLOBS))
def test_v2_template_matches_shared_reference(name: str) -> None:
    ref = REFERENCE / name
    if not ref.exists():
        pytest.skip("../shared/reference/longbench/v2 not present")
    assert (V2 / name).read_bytes() == ref.read_bytes()


def test_v2_folder_holds_exactly_the_recorded_templates() -> None:
    assert sorted(p.name for p in V2.glob("*.txt")) == sorted(BLOBS)


def test_provenance_records_every_blob_id() -> None:
    text = (V2 / "PROVENANCE.md").read_text(encoding="utf-8")
    assert "2e00731f8d0bff23dc4325161044d0ed8af94c1e" in text
    for name, blob in BLOBS.items():
        assert f"| `{name}` | `prompts/{name}` | `{blob}` |" in text
