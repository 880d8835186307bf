"""The only code that touches the machine: the Host protocol and its implementations.

Import from the submodules (``fwman.host.base``, ``.live``, ``.snapshot``): importing ``fwman.host.base`` for a
type does not pull in every implementation (startup time).
"""
