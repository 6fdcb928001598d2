"""Zip packages (docx, pptx, odt, epub): what one must pass before any library unpacks or
parses it, and one written back with only its changed members replaced. A zip whose
members declare more than MAX_UNPACKED bytes in all, more than MAX_MEMBERS members, or one
packed more than MAX_RATIO to one (a zip bomb), and XML that declares entities (the
"billion laughs"), are refused in one line. zipfile never unpacks more than a member
declares, so the declared sizes bound the work.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from translator.documents.document import BadDocument, one_line

MAX_UNPACKED = 256 * 2**20  # bytes, all members together
MAX_MEMBERS = 10_000
MAX_RATIO = 200  # unpacked ÷ packed, one member (text XML packs 5–20 to one)
_XML = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".svg")
_ENTITY = (b"<!ENTITY", "<!ENTITY".encode("utf-16-le"), "<!ENTITY".encode("utf-16-be"))
_CHUNK = 1 << 20
# what reading a broken, encrypted or truncated zip raises
_UNREADABLE = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    NotImplementedError,
    RuntimeError,
    OSError,
    zlib.error,
)


def checked_zip(data: bytes, what: str) -> None:
    """Refuse a zip that is broken, a bomb, or has XML declaring entities (BadDocument)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            check_sizes(members, what)
            for member in members:
                with archive.open(member) as part:
                    head = part.read(_CHUNK)
                    if member.filename.lower().endswith(_XML) or _looks_xml(head):
                        check_stream(part, f"{what}: {member.filename}", head)
    except _UNREADABLE as exc:
        raise BadDocument(f"{what} is not a readable zip archive ({one_line(exc)})") from None


def check_sizes(members: list[zipfile.ZipInfo], what: str) -> None:
    """A zip bomb refused by what its members declare, before any is unpacked."""
    if len(members) > MAX_MEMBERS:
        raise BadDocument(f"{what} has {len(members):,} members (at most {MAX_MEMBERS:,})")
    unpacked = sum(m.file_size for m in members)
    if unpacked > MAX_UNPACKED:
        raise BadDocument(
            f"{what} unpacks to {unpacked:,} bytes (at most {MAX_UNPACKED:,}): refused as "
            "a zip bomb"
        )
    for member in members:
        if member.file_size > MAX_RATIO * max(member.compress_size, 1) + _CHUNK:
            raise BadDocument(
                f"{what}: {member.filename} is packed {member.file_size:,} to "
                f"{member.compress_size:,} bytes: refused as a zip bomb"
            )


def check_xml(data: bytes, what: str) -> None:
    """Refuse XML that declares entities (they can expand without bound)."""
    if any(entity in data for entity in _ENTITY):
        raise BadDocument(f"{what} declares XML entities: refused (they can expand without bound)")


def check_stream(part, what: str, first: bytes = b"") -> None:
    """check_xml over a stream (its `first` bytes read already), a chunk at a time (chunks
    overlap by a declaration's length)."""
    tail, chunk = b"", first
    while chunk:
        check_xml(tail + chunk, what)
        tail, chunk = chunk[-32:], part.read(_CHUNK)


def _looks_xml(head: bytes) -> bool:
    """Whether a member is XML by its first bytes (a part of any name a library parses)."""
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    return start == b"<" or head[:2] in (b"\xff\xfe", b"\xfe\xff")


def repacked(data: bytes, replaced: dict[str, bytes], left_out: tuple[str, ...] = ()) -> bytes:
    """The zip `data` with the members named in `replaced` holding their new bytes, those in
    `left_out` gone (a signature the translation voids), every other member copied as it
    was: its bytes, its order, its compression."""
    out = io.BytesIO()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
            for info in source.infolist():
                if info.filename in left_out:
                    continue
                member = zipfile.ZipInfo(info.filename, info.date_time)
                member.compress_type = info.compress_type
                member.external_attr = info.external_attr
                member.create_system = info.create_system
                body = replaced.get(info.filename)
                target.writestr(member, body if body is not None else source.read(info))
    except _UNREADABLE as exc:
        raise BadDocument(f"a member of the file cannot be copied ({one_line(exc)})") from None
    return out.getvalue()
