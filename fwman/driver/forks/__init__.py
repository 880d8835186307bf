"""The P2P forks of NVIDIA's open kernel modules and the driver versions their branches carry.

A fork carries driver version V when it has a P2P *branch* (``refs/heads/``, its name saying ``p2p``; a tag does
not count) whose tree builds V: the ``NVIDIA_VERSION`` of its ``version.mk`` (:mod:`fwman.driver.versions`),
the name (``V-p2p``, ``V-p2p-v2``) only a hint where the tree cannot be read. Branches are listed live:
``git ls-remote --heads URL`` through the Host where git is installed, otherwise (or when git fails) the forge's
branches API with pagination. Every live result is cached in ``/var/cache/fwman/branches.json`` with the time
it was fetched; when a fork cannot be listed (offline, server error) its cached list is used and its age shown.

One module per job: :mod:`.model` (the data), :mod:`.config` (which forks a name stands for, donor-patch tables,
the one resolver), :mod:`.lsremote` (git ls-remote and its parsers), :mod:`.forge` (the forge's branches API),
:mod:`.trees` (what a branch's tree builds), :mod:`.cache` (the branch cache) and :mod:`.listing` (the listing
of every fork, over all of them).
"""
