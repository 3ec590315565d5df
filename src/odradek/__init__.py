"""odradek: a distributed commit log in Python that speaks Apache Kafka's wire protocol."""

__version__ = "0.1.0"
__all__ = ["__version__"]
