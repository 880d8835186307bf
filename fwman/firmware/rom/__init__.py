"""VBIOS files: the pure parser and its model.

:mod:`.parse` (``parse_rom``: bytes in, :class:`.model.RomImage` out, or a ParseError naming field and offset) assembles
what the parts read: :mod:`.layout` (every structure as a named table of fields), :mod:`.reader` (bounds-checked reads),
:mod:`.prefix` (the NVGI/IFR header and RFRD of a full dump), :mod:`.chain` (finding and walking the option-ROM chain)
and :mod:`.bit` (the BIT table's version, dates and strings). :mod:`.package` finds the images inside a vendor's update
program."""
