"""Prometheus metrics of a mirror process, with MM2's metric names.

MM2 reports through JMX as ``kafka.connect.mirror:type=MirrorSourceConnector,target=B,topic=A.orders,
partition=0`` (and ``type=MirrorCheckpointConnector,source=A,target=B,group=G,topic=..,partition=..``);
here those are Prometheus gauges named as the JMX exporter names them (Strimzi's rules:
``kafka_connect_mirror_<type lower-cased>_<attribute with _ for ->``):

* ``kafka_connect_mirror_mirrorsourceconnector_record_count`` {target, topic, partition}
  (``topic`` is the remote topic), ``..._byte_count``, ``..._record_age_ms`` and
  ``..._record_age_ms_{avg,min,max}``, ``..._replication_latency_ms`` and ``..._{avg,min,max}``;
* ``kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms``
  {source, target, group, topic, partition}.

Not MM2's (schema-aware mirroring has no MM2 counterpart): ``odradek_mirror_schema_ids_translated``
and ``odradek_mirror_schema_id_errors`` {source, target}: keys/values whose framed schema id was
rewritten to the target registry's, and those whose id the source registry did not know.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .flow import Flow

__all__ = ["MirrorCollector"]

SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"
CHECKPOINT = "kafka_connect_mirror_mirrorcheckpointconnector_"


class MirrorCollector(Collector):
    def __init__(self, flows: Iterable[Flow]) -> None:
        self.flows = list(flows)

    def collect(self) -> Iterator[Metric]:
        labels = ["target", "topic", "partition"]
        records = GaugeMetricFamily(SOURCE + "record_count", "Records replicated to the target (cumulative).", labels=labels)
        nbytes = GaugeMetricFamily(SOURCE + "byte_count", "Key and value bytes replicated to the target (cumulative).", labels=labels)
        windows = {
            (attr, suffix): GaugeMetricFamily(f"{SOURCE}{attr}{suffix}", f"{attr.replace('_', '-')}{suffix.replace('_', '-')}", labels=labels)
            for attr in ("record_age_ms", "replication_latency_ms") for suffix in ("", "_avg", "_min", "_max")
        }
        latency = GaugeMetricFamily(CHECKPOINT + "checkpoint_latency_ms", "Time to translate and emit the group's checkpoint.",
                                    labels=["source", "target", "group", "topic", "partition"])
        translated = GaugeMetricFamily("odradek_mirror_schema_ids_translated",
                                       "Keys and values whose schema id was rewritten to the target registry's.", labels=["source", "target"])
        id_errors = GaugeMetricFamily("odradek_mirror_schema_id_errors",
                                      "Keys and values whose schema id the source registry does not know (copied unchanged).",
                                      labels=["source", "target"])
        for flow in self.flows:
            target = flow.cfg.target
            if flow.schemas is not None:
                translated.add_metric([flow.cfg.source, target], flow.schemas.translated)
                id_errors.add_metric([flow.cfg.source, target], flow.stats.schema_id_errors)
            for tp, pm in sorted(flow.stats.partitions.items()):
                values = [target, tp.topic, str(tp.partition)]
                records.add_metric(values, pm.record_count)
                nbytes.add_metric(values, pm.byte_count)
                for attr in ("record_age_ms", "replication_latency_ms"):
                    w = getattr(pm, attr)
                    windows[(attr, "")].add_metric(values, w.last)
                    windows[(attr, "_avg")].add_metric(values, w.avg)
                    windows[(attr, "_min")].add_metric(values, 0.0 if w.count == 0 else w.min)
                    windows[(attr, "_max")].add_metric(values, w.max)
            for (group, tp), ms in sorted(flow.stats.checkpoint_latency_ms.items()):
                latency.add_metric([flow.cfg.source, target, group, tp.topic, str(tp.partition)], ms)
        yield records
        yield nbytes
        yield from windows.values()
        yield latency
        yield translated
        yield id_errors
