"""Automatic registration of ``format("odradek")`` with Spark.

pyspark (4.x) looks for installed top-level modules named ``pyspark_*`` that define
``DefaultSource`` when a session first resolves a Python data source; this module is that hook.
"""

from odradek.spark.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
