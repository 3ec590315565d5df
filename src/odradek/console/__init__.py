"""The web console and the HTTP listener (``/metrics``, ``/health``, ``/api``, pages).

``odradek.console.broker`` starts it inside a broker (``http.listeners``); ``odradek console``
serves it against any Kafka-compatible cluster. Importing this package imports nothing heavy.
"""
