"""VBIOS firmware: the pure ROM parser (:mod:`fwman.firmware.rom`) and image verification
(:mod:`fwman.firmware.romverify`)."""
