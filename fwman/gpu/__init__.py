"""GPUs: PCI sysfs and config space, nvidia-smi XML and topo parsers, the Card inventory."""
