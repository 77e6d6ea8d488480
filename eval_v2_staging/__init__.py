"""Staging for LongBench v2 data code, to be moved into eval/prepare/ (standard library only)."""
