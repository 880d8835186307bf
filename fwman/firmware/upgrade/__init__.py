"""upgrade."""
