"""Payload schemas of indexed sources: documents (verbatim, with line ranges) and code."""

from __future__ import annotations

import msgspec

from eventloom.schemas.catalogue_common import (
    Checksum,
    Count,
    LineNo,
    Name,
    Path,
    Payload,
    Tag,
    check_line_range,
)


class DocumentChunk(Payload, kw_only=True):
    """A slice of a document's content and the lines it spans."""

    text: str
    line_start: LineNo
    line_end: LineNo

    def __post_init__(self) -> None:
        check_line_range(self.line_start, self.line_end)


class DocumentIndexed(Payload, kw_only=True):
    """`document.indexed`: a document's text, kept verbatim so answers can quote and cite it."""

    path: Path
    content: str
    title: str | None = None
    checksum: Checksum | None = None
    line_start: LineNo | None = None
    line_end: LineNo | None = None
    media_type: Tag | None = None
    chunks: list[DocumentChunk] = msgspec.field(default_factory=list)
    tags: list[Tag] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        check_line_range(self.line_start, self.line_end)


class CodeFileIndexed(Payload, kw_only=True):
    """`code.file.indexed`: a source file was seen by the code indexer."""

    path: Path
    language: Tag | None = None
    checksum: Checksum | None = None
    line_count: Count | None = None


class CodeSymbolIndexed(Payload, kw_only=True):
    """`code.symbol.indexed`: a function, class, method ... defined in a source file."""

    path: Path
    symbol: Name
    kind: Tag
    line_start: LineNo
    line_end: LineNo
    signature: str | None = None
    docstring: str | None = None
    language: Tag | None = None
    checksum: Checksum | None = None

    def __post_init__(self) -> None:
        check_line_range(self.line_start, self.line_end)
