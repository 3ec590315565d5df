"""A local SparkSession set up the way odradek's pipelines, tests and benchmarks need it.

UI off, driver bound to 127.0.0.1, Python workers on the running interpreter, session time
zone UTC, and ``format("odradek")`` registered.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from odradek.spark import register

__all__ = ["local_session"]


def local_session(
    master: str = "local[2]",
    app_name: str = "odradek",
    conf: Mapping[str, str] | None = None,
) -> Any:
    """Get or create a SparkSession on ``master`` with ``odradek`` registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # lazy: pyspark is optional and slow to import
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.python.worker.reuse", "true")
        # a Python worker that takes longer to start (a loaded machine) must not fail the query
        .config("spark.python.authenticate.socketTimeout", "120s")
    )
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
