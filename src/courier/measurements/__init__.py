"""The measurement contract between the tiers that record and the analysis.

- ``record_schema``: the record kinds and their fields (docs/measurements.md);
- ``manifest``: ``manifest.json``, the experiment's runs, written and read;
- ``parquet``: writing records to ``<run>/<kind>/<process>-<n>.parquet``.

The lab writes through it, the analysis reads through it, and the generated
experiments (``courier.analysis.synthetic``) are built through it.
"""
