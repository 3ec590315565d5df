"""Option and trigger plumbing shared by the pipelines' Spark readers and writers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

Trigger = Literal["available-now", "continuous"]


def with_client_options(builder: Any, client_options: Mapping[str, str] | None) -> Any:
    """``builder`` (a DataStreamReader/Writer or DataFrameReader of format ``odradek``) with
    every client option passed as ``kafka.<key>``."""
    for k, v in (client_options or {}).items():
        builder = builder.option(f"kafka.{k}", v)
    return builder


def with_trigger(writer: Any, trigger: Trigger, interval: str) -> Any:
    """``writer`` with ``availableNow`` ("available-now": process what is there, then stop) or
    a ``processingTime`` trigger every ``interval`` ("continuous"); ValueError otherwise."""
    if trigger == "available-now":
        return writer.trigger(availableNow=True)
    if trigger == "continuous":
        return writer.trigger(processingTime=interval)
    raise ValueError(f"unknown trigger {trigger!r} (available-now, continuous)")
