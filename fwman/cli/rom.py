"""``fwman rom inspect`` and ``fwman rom verify``: read a VBIOS file, and judge it against a card.

Options and rendering only: the use cases are in :mod:`fwman.app.rom`.
"""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish


@click.group()
def rom() -> None:
    """Read VBIOS files: what is in them, and whether one fits a card.

    \b
    Examples:
      fwman rom inspect backup-41.rom
      fwman rom verify EVGA-ReBAR.rom --card 41:00.0
    """


@rom.command()
@click.argument("file", type=click.Path(dir_okay=False))
@leaf_options
def inspect(app: AppContext, file: str, as_json: bool) -> None:
    """Show every identity field of a VBIOS FILE with the offset it was read from, and the image chain.

    Reads full `nvflash --save` dumps (NVGI), vendor option ROMs (55 AA), stripped images, the truncated
    image Linux exposes at /sys/bus/pci/devices/*/rom, files cut short (shown as far as they go: "the
    header says N bytes, the file has M") and files behind a prefix no source documents (the Blackwell
    image seen in public), walked to their PCI images. All but the first two are recognised and reported,
    and `rom verify` refuses them as flash sources. Another maker's option ROM is named as such. The labels
    follow `nvflash --version`. Nothing is modified.

    \b
    Examples:
      fwman rom inspect backup-41.rom
      fwman rom inspect EVGA-ReBAR.rom --json | jq '.image | {version, subsystem, chain_sha256}'

    Exit 4 when FILE is not a VBIOS image fwman can read (the error names the field and offset).
    """
    from fwman.app.rom import inspect_rom

    finish(app, "rom.inspect", inspect_rom(file), as_json)


@rom.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--card", "bus", required=True, metavar="BUS", help="The target card's PCI bus id (see `fwman scan`).")
@click.option(
    "--board-id", metavar="HEX", help="The image's board ID (from `nvflash --version FILE`) to compare with the card's."
)
@leaf_options
def verify(app: AppContext, file: str, bus: str, board_id: str | None, as_json: bool) -> None:
    """Check whether FILE may be flashed onto the card at BUS; print every check and its result.

    Blocks (exit 3): wrong vendor/device or subsystem, wrong board ID, a stripped, sysfs-truncated, truncated
    or container image,
    a bad x86 checksum, NVGI and NPDE disagreeing, no readable version, and from the VBIOS catalog: a hash
    that differs from the published one, no published hash at all ("unverified"), a withdrawn image. Warns:
    an image older than the card's firmware, an image not in the catalog, RFRD or NVGI-copy inconsistencies.
    Nothing is written; the card is read from sysfs and nvidia-smi (or from --snapshot).

    \b
    Examples:
      fwman rom verify EVGA-ReBAR.rom --card 41:00.0
      fwman rom verify EVGA-ReBAR.rom --card 41:00.0 --board-id 0x0240 --json
      fwman rom verify img.rom --card 41:00.0 --snapshot fixtures/hosts/rig-4x3090

    Exit 0 when nothing blocks, 3 when a check blocks, 4 when FILE is unreadable as a VBIOS, 2 for an
    unknown card.
    """
    from fwman.app.rom import verify_rom

    finish(app, "rom.verify", verify_rom(app.host, file, bus, board_id), as_json)
