"""odradek.client."""
