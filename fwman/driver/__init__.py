"""The NVIDIA driver side: versions, P2P forks, kernel modules (.ko), depmod resolution, user space, audit."""
