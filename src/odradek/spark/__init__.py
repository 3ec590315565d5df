"""odradek.spark."""
