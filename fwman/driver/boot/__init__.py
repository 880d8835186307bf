"""boot."""
