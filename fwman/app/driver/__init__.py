"""``fwman driver ...``: the use cases of the driver group."""
