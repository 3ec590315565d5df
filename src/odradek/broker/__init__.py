"""odradek.broker."""
