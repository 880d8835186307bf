"""``fwman catalog ...``: the use cases of the catalog group."""
