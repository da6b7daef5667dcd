"""Extraction of indexed sources: documents, code files and code symbols, each cited by line range."""

from __future__ import annotations

from typing import Final

from eventloom.schemas.catalogue import CodeFileIndexed, CodeSymbolIndexed, DocumentIndexed
from projectors.graph.extraction import Extraction, Extractor, clip, compact, typed
from readmodels.graph.model import EntityRef


def line_count(text: str) -> int:
    """Lines in `text` (a final newline does not start another line; empty text has one)."""
    return max(1, text.count("\n") + (0 if text.endswith("\n") else 1))


def document_indexed(x: Extraction, p: DocumentIndexed) -> None:
    properties = {
        "title": p.title,
        "media_type": p.media_type,
        "checksum": p.checksum,
        "tags": p.tags or None,
    }
    me = x.entity(p.path, "document", p.title, compact(properties))
    start = p.line_start or 1
    end = p.line_end or start + line_count(p.content) - 1
    x.cite(p.path, line_start=start, line_end=end, checksum=p.checksum, text=p.content, by=me)
    for chunk in p.chunks:
        x.cite(
            p.path,
            line_start=chunk.line_start,
            line_end=chunk.line_end,
            checksum=p.checksum,
            text=chunk.text,
            by=me,
        )
    x.summary = f"document indexed: {p.path}" + (f" ({p.title})" if p.title else "")


def code_file_indexed(x: Extraction, p: CodeFileIndexed) -> None:
    properties = {"language": p.language, "checksum": p.checksum, "line_count": p.line_count}
    me = x.entity(p.path, "code_file", None, compact(properties))
    has_lines = p.line_count is not None and p.line_count > 0
    x.cite(
        p.path,
        line_start=1 if has_lines else None,
        line_end=p.line_count if has_lines else None,
        checksum=p.checksum,
        by=me,
    )
    x.summary = f"code file indexed: {p.path}"


def code_symbol_indexed(x: Extraction, p: CodeSymbolIndexed) -> None:
    properties = {
        "symbol": p.symbol,
        "kind": p.kind,
        "path": p.path,
        "line_start": p.line_start,
        "line_end": p.line_end,
        "signature": p.signature,
        "docstring": p.docstring,
        "language": p.language,
    }
    summary = p.signature or (clip(p.docstring) if p.docstring else None)
    me = x.entity(f"{p.path}::{p.symbol}", "code_symbol", summary, compact(properties))
    x.relation(me, EntityRef(p.path, "code_file"), "defined_in")
    x.cite(p.path, line_start=p.line_start, line_end=p.line_end, checksum=p.checksum, by=me)
    x.summary = f"{p.kind} {p.symbol} in {p.path}:{p.line_start}-{p.line_end}"


EXTRACTORS: Final[dict[str, Extractor]] = {
    "document.indexed": typed(DocumentIndexed, document_indexed),
    "code.file.indexed": typed(CodeFileIndexed, code_file_indexed),
    "code.symbol.indexed": typed(CodeSymbolIndexed, code_symbol_indexed),
}
