"""Why an experiment directory could not be analysed.

CourierError
└── ExperimentError        the experiment directory cannot be analysed
    ├── ManifestError      manifest.json is missing or malformed
    ├── RecordFileError    a record file is unreadable or has the wrong schema
    ├── NoRecords          no client request records at all
    └── InvalidTrim        a --trim specification that does not parse
"""

from __future__ import annotations

from pathlib import Path

from courier import errors


class ExperimentError(errors.CourierError):
    """The experiment directory cannot be analysed."""

    status = errors.Status.BAD_REQUEST


class ManifestError(ExperimentError):
    """The experiment manifest is missing or malformed."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class RecordFileError(ExperimentError):
    """A record file is unreadable or does not match the record schema."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class NoRecords(ExperimentError):
    """The experiment has no client request records to analyse."""


class InvalidTrim(ExperimentError):
    """Trim must be START_S:END_S, e.g. 5:55, 5:-5 or 5: (seconds from the run start)."""
