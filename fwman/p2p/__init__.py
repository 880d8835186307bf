"""GPU peer-to-peer: the tests that prove it works, and the record of what they proved on which configuration.

The concept, in one package: :mod:`fwman.p2p.copytest` the copy test and its report (pure, runs on any
DeviceLayer), :mod:`fwman.p2p.cuda` the ctypes binding of ``libcuda.so.1`` and :mod:`fwman.p2p.device` the
interface between them; :mod:`fwman.p2p.nccl` the NCCL all-reduce tier (:mod:`fwman.p2p.nccl_log` its log and
output parsers); :mod:`fwman.p2p.soak` the long run; :mod:`fwman.p2p.history` the record format and the
history file (its :func:`~fwman.p2p.history.standing`: is the newest record still about this configuration),
:mod:`fwman.p2p.record` a record built from a test's report, :mod:`fwman.p2p.fingerprint` the one reader of
the configuration a record is taken on. What a report says about P2P (the doctor's findings, the metrics) is
judged in :mod:`fwman.reports`, one layer up, over these.
"""
