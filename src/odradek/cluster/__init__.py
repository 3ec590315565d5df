"""odradek's cluster on Apache ZooKeeper: a local ZooKeeper server and Kafka's znode layout.

Nothing here is imported by a single-node ``odradek broker``; kazoo is imported only by ``zk``.
"""
