"""``fwman dkms ...``: the use cases of the dkms group."""
