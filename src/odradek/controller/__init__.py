"""odradek's controller for a cluster on ZooKeeper (Kafka's ZooKeeper-mode ``KafkaController``).

* ``context``: the controller's view of the cluster (``ControllerContext``);
* ``election``: leader election rules;
* ``decisions``: pure functions of (context, event) -> (next context, Decision);
* ``assignment``: Kafka's rack-unaware replica assignment;
* ``controller``: the single-threaded event loop over ZooKeeper (``Controller``, the ``ControllerChannel``
  Protocol and a ``RecordingChannel``);
* ``channel``: ``TcpControllerChannel``, the requests over TCP to the brokers' listeners.
"""
