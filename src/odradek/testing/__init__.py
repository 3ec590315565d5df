"""odradek.testing."""
