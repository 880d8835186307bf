"""The platform a host runs on and the platforms around it: virtual machine detection, container and VM configs."""
