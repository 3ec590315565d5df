"""odradek.broker.apis."""
