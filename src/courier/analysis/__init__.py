"""The analysis pipeline: experiment directory in, report with tables and plots out.

``pipeline.run`` is the entry point; ``synthetic.write_experiment`` writes a
directory of generated records for tests, benchmarks and demos. Modules:

- reading (the manifest and the record schema are ``courier.measurements``'):
  ``io`` (record files, Spark schemas), ``trimming`` (measured intervals),
  ``session`` (a quiet Spark session), ``inputs`` (the records as DataFrames);
- computing: ``transforms`` (pure DataFrame -> DataFrame steps), ``stats``,
  ``throughput``, ``components``, ``traces``, ``factors``, ``factorial``,
  ``validity``, gathered by ``results`` into small ``tables.Table``s;
- rendering: ``plots`` (matplotlib), ``report`` (Markdown and HTML) and
  ``content`` (what the report says).
"""

from __future__ import annotations

import warnings

# PySpark warns on import that it is not yet tested with pandas 3; the pipeline
# never converts to pandas, so the warning says nothing about Courier's results.
warnings.filterwarnings(
    "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
)
