"""odradek's controller for a cluster on ZooKeeper (Kafka's ZooKeeper-mode ``KafkaController``).

* ``context``: the controller's view of the cluster (``ControllerContext``);
* ``election``: leader election rules;
* ``decisions``: pure functions of (context, event) -> (next context, Decision);
* ``assignment``: Kafka's rack-unaware replica assignment;
* ``controller``: the single-threaded event loop over ZooKeeper (``Controller``, the ``ControllerChannel``
  Protocol and a ``RecordingChannel``);
* ``channel``: ``ControllerChannelManager``, the requests to the brokers on the broker's asyncio
  loop through the inter-broker client (``odradek.broker.inter_broker_client``).
"""
