"""odradek.spark: a PySpark data source named ``odradek`` for topics.

``format("odradek")`` reads and writes topics in batch and in structured streaming with the
schema and option names of Spark's own Kafka source, through odradek.client::

    import odradek.spark
    odradek.spark.register(spark)
    df = (spark.read.format("odradek")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

See docs/spark.md for every option, the exactly-once streaming sink and its limits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["OdradekDataSource", "register"]

if TYPE_CHECKING:
    from odradek.spark.source import OdradekDataSource


def register(spark: Any) -> None:
    """Register ``format("odradek")`` with a SparkSession (idempotent)."""
    # lazy: pyspark is optional (see __getattr__)
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)


def __getattr__(name: str) -> Any:
    # pyspark is an optional dependency: import it only when the data source is used.
    if name == "OdradekDataSource":
        from odradek.spark.source import OdradekDataSource

        return OdradekDataSource
    raise AttributeError(name)
