"""ImageMagick's policy inside the conversion sandbox: figures in PDF and PostScript are read there, and
only there, under resource limits that keep inside the conversion's own.

LaTeXML turns a paper's figures into web images through ImageMagick (Perl's Image::Magick), which reads
PDF, EPS and PS through Ghostscript. Debian's policy (/etc/ImageMagick-6/policy.xml) refuses those
coders, so every such figure was missing from the HTML and counted as an error. Reading PostScript
means running a program, which is safe here only because the whole conversion runs in the sandbox
(conversion/sandbox.py), as an unprivileged user, without network, under its memory, process, disk and
time limits; Ghostscript also runs with -dSAFER, as ImageMagick's delegate starts it. So the policy that
allows them is bound over the system's policy file inside the sandbox alone; the host keeps its own.

A policy's `rights` for a coder can only be narrowed by a second policy file (MAGICK_CONFIGURE_PATH
adds files, and the system's `none` still wins), which is why the file is replaced, not added to.

The limits follow the conversion's (engine.Limits): ImageMagick's pixel cache spills from memory to
disk, both within the conversion's budgets, and a figure gets a share of the conversion's time. A
figure bomb (a page of 10^5 points a side, a thousand pages, a PostScript loop) then fails that figure
or ends the conversion with a message naming its limit, and nothing else.
"""

from __future__ import annotations

# Where ImageMagick 6 and 7 read their policy. Each is bound over only where the host has it.
POLICY_PATHS = ("/etc/ImageMagick-6/policy.xml", "/etc/ImageMagick-7/policy.xml")
# Coders allowed to read: the figure formats LaTeXML meets in papers. PDF, PS and EPS go through
# Ghostscript, which hands ImageMagick its pages as PNG or, for some PDFs (CMYK, with alpha), as PAM or
# another of the PNM family; the rest are ImageMagick's own decoders.
READ_CODERS = (
    "PDF", "EPS", "EPI", "EPSI", "EPSF", "PS", "PS2", "PS3", "PNG", "JPEG", "JPG", "GIF", "SVG", "TIFF", "BMP",
    "PAM", "PNM", "PPM", "PGM", "PBM",
)  # fmt: skip
WRITE_CODERS = ("PNG", "JPEG", "JPG", "GIF", "SVG")
# At most this many images (pages) in one file: a figure is a page or a few, a thousand-page PDF is not.
MAX_PAGES = 32
# The largest figure in pixels a side, and in pixels in all (at 100 dpi a 16,000 pixel side is 4 metres).
MAX_SIDE_PIXELS = 16_000
MAX_AREA_PIXELS = 128_000_000
# Shares of the conversion's budgets one figure may hold: memory for the pixel cache (then a memory
# map), disk for what spills over, time for reading and writing one figure.
MEMORY_SHARE = 1 / 8
MAP_SHARE = 1 / 4
DISK_SHARE = 1 / 2
TIME_SHARE = 1 / 2
# At least this much of each, so a small test limit still reads a small figure.
_MIN_MB = 16
_MIN_SECONDS = 5

_TEMPLATE = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE policymap [
  <!ELEMENT policymap (policy)*>
  <!ATTLIST policymap xmlns CDATA #FIXED ''>
  <!ELEMENT policy EMPTY>
  <!ATTLIST policy xmlns CDATA #FIXED '' domain NMTOKEN #REQUIRED name NMTOKEN #IMPLIED
    pattern CDATA #IMPLIED rights NMTOKEN #IMPLIED stealth NMTOKEN #IMPLIED value CDATA #IMPLIED>
]>
<!-- The conversion sandbox's ImageMagick policy, written by conversion/imagemagick.py for one run. -->
<policymap>
  <policy domain="resource" name="memory" value="{memory}MiB"/>
  <policy domain="resource" name="map" value="{map}MiB"/>
  <policy domain="resource" name="disk" value="{disk}MiB"/>
  <policy domain="resource" name="area" value="{area}"/>
  <policy domain="resource" name="width" value="{side}"/>
  <policy domain="resource" name="height" value="{side}"/>
  <policy domain="resource" name="list-length" value="{pages}"/>
  <policy domain="resource" name="time" value="{seconds}"/>
  <policy domain="resource" name="thread" value="1"/>
  <policy domain="delegate" rights="none" pattern="*"/>
  <policy domain="delegate" rights="execute" pattern="gs"/>
  <policy domain="filter" rights="none" pattern="*"/>
  <policy domain="path" rights="none" pattern="@*"/>
  <policy domain="coder" rights="none" pattern="*"/>
  <policy domain="coder" rights="read" pattern="{{{read}}}"/>
  <policy domain="coder" rights="read|write" pattern="{{{write}}}"/>
</policymap>
"""


def policy_xml(*, memory_mb: int, disk_mb: int, timeout: float) -> bytes:
    """The policy for one conversion with these limits (its memory, disk and wall-clock budgets)."""
    return _TEMPLATE.format(
        memory=max(_MIN_MB, int(memory_mb * MEMORY_SHARE)),
        map=max(_MIN_MB, int(memory_mb * MAP_SHARE)),
        disk=max(_MIN_MB, int(disk_mb * DISK_SHARE)),
        area=MAX_AREA_PIXELS,
        side=MAX_SIDE_PIXELS,
        pages=MAX_PAGES,
        seconds=max(_MIN_SECONDS, int(timeout * TIME_SHARE)),
        read=",".join(READ_CODERS),
        write=",".join(WRITE_CODERS),
    ).encode()
