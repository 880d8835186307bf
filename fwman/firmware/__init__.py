"""VBIOS firmware: the pure ROM parser (:mod:`fwman.firmware.rom.parse`) and image verification
(:mod:`fwman.firmware.verify.compatible`)."""
