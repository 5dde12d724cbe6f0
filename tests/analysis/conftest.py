"""One Spark session (local[2]) for every analysis test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from courier.analysis import session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    spark = session.create("local[2]", driver_memory="1g")
    yield spark
    spark.stop()
