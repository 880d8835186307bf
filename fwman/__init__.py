"""fwman: firmware and patched-driver lifecycle manager for multi-GPU NVIDIA GeForce hosts."""

__version__ = "0.1.0"
