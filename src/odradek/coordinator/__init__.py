"""odradek.coordinator."""
