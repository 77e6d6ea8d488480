"""Stage 7, report: numbers and the verdict -> cells and tables, rendered as Markdown, summary.json, HTML + SVG
and the console summary; every output renders the same cells and computes no statistics.

Entry points: `tables.build_tables` (one module per table), `write.write_reports` / `write.write_scores` (the files
written), `console` (what the commands print).
"""
