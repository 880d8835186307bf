"""``fwman p2p test``: copy between every pair of GPUs through the CUDA driver API and compare every byte.

:mod:`fwman.p2p.copytest` holds the test and its report (pure, runs on any DeviceLayer); :mod:`fwman.p2p.cuda`
is the ctypes binding of ``libcuda.so.1``; :mod:`fwman.p2p.device` the interface between them.
"""
