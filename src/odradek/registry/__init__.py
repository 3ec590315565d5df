"""A Confluent-compatible schema registry inside the broker.

* ``records``: the ``_schemas`` topic's key/value JSON (Confluent's formats);
* ``state``: the in-memory state, built by replaying those records;
* ``store``: ``_schemas`` through odradek.client: replay, one serialized writer,
  read-your-writes;
* ``avro_format``, ``json_format``, ``schemas``, ``compatibility``: parsing, stored forms,
  compatibility levels;
* ``service``: the operations with Confluent's rules and errors (``errors``);
* ``routers``, ``app``: the REST API, one router per resource; ``broker``: the start and stop
  inside a broker (``schema.registry.listeners``).

Importing this package imports nothing heavy.
"""
