"""``fwman modules ...``: the use cases of the modules group."""
