"""Official LongBench v1 prompt templates and output limits, as data (see PROVENANCE.md)."""
