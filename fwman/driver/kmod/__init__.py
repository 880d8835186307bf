"""kmod."""
