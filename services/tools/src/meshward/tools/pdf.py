"""The `pdf_extract` tool: the text of a (base64) PDF, page by page, with pypdf.

Untrusted input, so everything is bounded (pypdf >= 6.18 for `apply_configuration`; limits unknown to the installed
pypdf are skipped):

* size: the base64 *string* length is checked before anything is decoded (``too_large``), then the decoded bytes;
* pages: at most ``max_requested_pages`` numbers in ``pages`` (``too_large``); with ``pages`` left out the first
  ``max_pages`` pages are extracted and the result says ``truncated``;
* text: a per-page and a total character cap; extraction of a page stops as soon as its cap is reached (a text
  visitor aborts pypdf's interpreter), and the whole run stops at the total cap;
* decompression and parsing: pypdf's own limits are tightened for the extraction (``apply_configuration``: per-stream
  inflate output, content-stream token budget, form-XObject invocations, page-tree size...). A page that trips one of
  them is refused as ``too_large`` ("possible PDF bomb"); ask for other pages with ``pages``;
* time: extraction runs in a worker thread (``asyncio.to_thread``) under the Tool timeout; when the call is cancelled
  (timeout) a flag is raised that the worker checks between pages and every few hundred content-stream operators,
  so an abandoned extraction stops promptly instead of burning a CPU in the background.

Errors: not base64 / not a PDF (no ``%PDF-`` header) / malformed / encrypted with a password / bad page numbers ->
``bad_request``; over a size, page-count or decompression bound -> ``too_large``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import io
import re
import threading
import unicodedata
from dataclasses import dataclass
from typing import Annotated, Any

from meshward.contracts import DataContent, ErrorCode, TextContent
from pydantic import BaseModel, ConfigDict, Field

from .registry import Tool, ToolError

MAX_PDF_BYTES = 10 * 1024 * 1024
MAX_REQUESTED_PAGES = 50
MAX_PAGES = 100
MAX_PAGE_NUMBER = 100_000


def _b64_len(n_bytes: int) -> int:
    return 4 * ((n_bytes + 2) // 3)


PageNumber = Annotated[int, Field(ge=1, le=MAX_PAGE_NUMBER)]
# The count bound is advertised in the schema but enforced by the tool (too_large), like the size bound.
PageList = Annotated[list[PageNumber], Field(json_schema_extra={"maxItems": MAX_REQUESTED_PAGES})]


class PdfExtractArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content_base64: str = Field(
        min_length=1,
        description=f"the PDF file, base64-encoded (at most {MAX_PDF_BYTES // (1024 * 1024)} MB decoded); a 'data:application/pdf;base64,' prefix is accepted",
        json_schema_extra={"maxLength": _b64_len(MAX_PDF_BYTES)},
    )
    pages: PageList | None = Field(
        default=None,
        description=f"1-based page numbers to extract (at most {MAX_REQUESTED_PAGES}); leave out for all pages (the first {MAX_PAGES})",
    )


@dataclass(frozen=True)
class PdfLimits:
    max_bytes: int = MAX_PDF_BYTES
    max_requested_pages: int = MAX_REQUESTED_PAGES
    max_pages: int = MAX_PAGES  # pages extracted when `pages` is left out
    max_page_chars: int = 20_000
    max_total_chars: int = 100_000
    # pypdf limits applied during extraction (per stream): a text page's content stream is KBs, rarely a few MB.
    max_stream_bytes: int = 8_000_000
    max_stream_tokens: int = 300_000  # content-stream parse budget; pypdf parses ~150k tokens/s
    max_xform_invocations: int = 500
    max_page_tree_entries: int = 50_000
    max_page_operators: int = 300_000  # interpreted operators per page (forms included)
    max_total_operators: int = 1_500_000  # ... and per call: bounds the CPU of many heavy-but-legal pages
    timeout_s: float = 30.0


class _Stop(Exception):
    """Raised inside pypdf's interpreter (from a visitor) to stop extracting a page early."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


_DATA_URL = re.compile(r"^data:[\w./+-]*;base64,", re.IGNORECASE)


def decode_pdf(content_base64: str, limits: PdfLimits) -> bytes:
    """Size-check, then decode; raise the typed error for oversized, non-base64 or non-PDF input."""
    max_b64 = _b64_len(limits.max_bytes)
    # A generous first bound on the raw string (line breaks are allowed in base64) before copying anything.
    if len(content_base64) > max_b64 + max_b64 // 20 + 1024:
        raise ToolError(
            ErrorCode.TOO_LARGE, f"pdf_extract: the PDF is over the {limits.max_bytes // (1024 * 1024)} MB limit"
        )
    s = _DATA_URL.sub("", content_base64.strip(), count=1)
    s = "".join(s.split())
    if len(s) > max_b64:
        raise ToolError(
            ErrorCode.TOO_LARGE, f"pdf_extract: the PDF is over the {limits.max_bytes // (1024 * 1024)} MB limit"
        )
    if len(s) % 4:
        s += "=" * (-len(s) % 4)  # tolerate missing padding
    try:
        data = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(ErrorCode.BAD_REQUEST, "pdf_extract: content_base64 is not valid base64") from None
    if len(data) > limits.max_bytes:
        raise ToolError(
            ErrorCode.TOO_LARGE, f"pdf_extract: the PDF is over the {limits.max_bytes // (1024 * 1024)} MB limit"
        )
    if b"%PDF-" not in data[:1024]:
        raise ToolError(ErrorCode.BAD_REQUEST, "pdf_extract: not a PDF (no %PDF- header)")
    return data


def _pypdf_overrides(limits: PdfLimits) -> dict[str, Any]:
    import pypdf

    wanted = {
        "maximum_declared_stream_length": limits.max_bytes,
        "array_based_stream_maximum_output_length": limits.max_stream_bytes,
        "zlib_maximum_output_length": limits.max_stream_bytes,
        "lzw_maximum_output_length": limits.max_stream_bytes,
        "run_length_maximum_output_length": limits.max_stream_bytes,
        "brotli_maximum_output_length": limits.max_stream_bytes,
        "jbig2_maximum_output_length": limits.max_stream_bytes,
        "image_maximum_buffer_size": limits.max_stream_bytes,
        "stream_decoding_work_maximum_length": 4 * limits.max_stream_bytes,
        "stream_parsing_work_maximum_count": limits.max_stream_tokens,
        "xform_maximum_invocations_per_extraction": limits.max_xform_invocations,
        "page_tree_maximum_entries": limits.max_page_tree_entries,
        "page_tree_maximum_page_entries": 20 * limits.max_page_tree_entries,
        "jbig2dec_binary": None,  # never shell out to an external decoder for untrusted input
    }
    known = {f.name for f in dataclasses.fields(pypdf.Configuration)}
    return {k: v for k, v in wanted.items() if k in known}


def _clean(text: str) -> str:
    """Drop control characters (NUL and friends) pypdf may emit; keep newlines and tabs."""
    if text.isprintable():
        return text
    return "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc")


def _bad(msg: str) -> ToolError:
    return ToolError(ErrorCode.BAD_REQUEST, f"pdf_extract: {msg}")


def _describe_exc(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return f"{type(e).__name__}: {text}"[:300]


def extract_text(data: bytes, pages: list[int] | None, limits: PdfLimits, cancel: threading.Event | None = None):
    """Blocking: the extracted text and the metadata dict. Raises ToolError. Call it from a worker thread."""
    import pypdf
    from pypdf.errors import DependencyError, LimitReachedError, PdfReadError

    cancel = cancel or threading.Event()
    with pypdf.apply_configuration(**_pypdf_overrides(limits)):
        try:
            reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
            encrypted = reader.is_encrypted
            if encrypted:
                # Owner-password-only PDFs open with the empty user password, as in any viewer.
                try:
                    opened = reader.decrypt("")
                except (DependencyError, NotImplementedError) as e:
                    raise _bad(f"encrypted PDF with an unsupported cipher ({_describe_exc(e)})") from None
                if not opened:
                    raise _bad("the PDF is encrypted and needs a password; send a decrypted copy")
            n_total = len(reader.pages)
        except ToolError:
            raise
        except LimitReachedError as e:
            raise ToolError(
                ErrorCode.TOO_LARGE, f"pdf_extract: the PDF structure is over a safety limit ({e})"
            ) from None
        except RecursionError:
            raise _bad("malformed PDF (nesting too deep)") from None
        except Exception as e:  # pypdf raises many types on hostile input (PdfReadError, KeyError, ValueError...)
            kind = "malformed PDF" if isinstance(e, PdfReadError) else "malformed PDF, cannot be parsed"
            raise _bad(f"{kind}: {_describe_exc(e)}") from None

        if n_total == 0:
            raise _bad("the PDF has no pages")
        truncated = False
        if pages is None:
            selection = list(range(1, min(n_total, limits.max_pages) + 1))
            truncated = n_total > limits.max_pages
        else:
            missing = [p for p in pages if p > n_total]
            if missing:
                raise _bad(f"page {missing[0]} does not exist; the PDF has {n_total} page{'s' if n_total != 1 else ''}")
            selection = sorted(set(pages))

        parts: list[str] = []
        counter = _OpCounter()
        extracted: list[int] = []
        empty: list[int] = []
        total = 0
        for number in selection:
            if cancel.is_set():
                raise _Stop("cancelled")
            budget = min(limits.max_page_chars, limits.max_total_chars - total)
            if budget <= 0:
                truncated = True
                break
            text, cut = _extract_page(reader, number, budget, limits, cancel, counter, LimitReachedError)
            truncated = truncated or cut
            if not text.strip():
                empty.append(number)
            total += len(text)
            parts.append(
                f"--- page {number} ---\n{text.strip() or '(no extractable text: scanned image or empty page)'}"
            )
            extracted.append(number)

    body = "\n\n".join(parts)
    if truncated:
        body += f"\n\n[truncated: {len(extracted)} of {n_total} pages extracted, {total} characters; ask for specific pages with `pages`]"
    meta = {
        "pages": n_total,
        "extracted_pages": extracted,
        "truncated": truncated,
        "chars": total,
        "empty_pages": empty,
        "encrypted": encrypted,
    }
    return body, meta


@dataclass
class _OpCounter:
    total: int = 0


def _extract_page(
    reader, number: int, budget: int, limits: PdfLimits, cancel: threading.Event, counter: _OpCounter, limit_error
) -> tuple[str, bool]:
    fragments: list[str] = []
    seen = 0
    ops = 0

    def on_text(text, *_):
        nonlocal seen
        if text:
            fragments.append(text)
            seen += len(text)
            if seen > budget:
                raise _Stop("full")

    def on_operator(*_):
        nonlocal ops
        ops += 1
        if ops % 256 == 0:
            counter.total += 256
            if cancel.is_set():
                raise _Stop("cancelled")
            if ops > limits.max_page_operators:
                raise _Stop("operators")
            if counter.total > limits.max_total_operators:
                raise _Stop("total_operators")

    try:
        page = reader.pages[number - 1]
        text = page.extract_text(visitor_text=on_text, visitor_operand_before=on_operator)
    except _Stop as stop:
        if stop.reason == "full":
            return _clean("".join(fragments))[:budget], True
        if stop.reason == "cancelled":
            raise
        if stop.reason == "total_operators":
            raise ToolError(
                ErrorCode.TOO_LARGE,
                f"pdf_extract: over {limits.max_total_operators} drawing operators in total by page {number}; ask for fewer pages",
            ) from None
        raise ToolError(
            ErrorCode.TOO_LARGE,
            f"pdf_extract: page {number} has over {limits.max_page_operators} drawing operators; ask for other pages with `pages`",
        ) from None
    except limit_error as e:
        raise ToolError(
            ErrorCode.TOO_LARGE,
            f"pdf_extract: page {number} is over a decompression/parsing limit (possible PDF bomb: {e}); ask for other pages with `pages`",
        ) from None
    except RecursionError:
        raise _bad(f"malformed PDF: page {number} nests too deep") from None
    except Exception as e:  # hostile input makes pypdf raise anything
        raise _bad(f"malformed PDF: cannot extract page {number}: {_describe_exc(e)}") from None
    text = _clean(text)
    if len(text) > budget:
        return text[:budget], True
    return text, False


def make_pdf_extract_fn(limits: PdfLimits):
    async def pdf_extract(args: PdfExtractArgs):
        if args.pages is not None and len(args.pages) > limits.max_requested_pages:
            raise ToolError(
                ErrorCode.TOO_LARGE,
                f"pdf_extract: {len(args.pages)} pages requested; at most {limits.max_requested_pages} per call",
            )
        cancel = threading.Event()

        def work():
            return extract_text(decode_pdf(args.content_base64, limits), args.pages, limits, cancel)

        try:
            text, meta = await asyncio.to_thread(work)
        except asyncio.CancelledError:
            cancel.set()  # the worker thread cannot be killed: tell it to stop at its next check
            raise
        except _Stop:  # cancelled from outside while the thread was finishing; surface as a timeout
            raise ToolError(ErrorCode.DEADLINE_EXCEEDED, "pdf_extract: cancelled") from None
        return [TextContent(text=text), DataContent(data=meta)]

    return pdf_extract


def tools(limits: PdfLimits | None = None) -> list[Tool]:
    limits = limits or PdfLimits()
    return [
        Tool(
            name="pdf_extract",
            description=(
                "Extract the text of a PDF (base64, up to "
                f"{limits.max_bytes // (1024 * 1024)} MB), page by page, optionally only the given 1-based pages; "
                "returns the text with '--- page N ---' separators and the page count."
            ),
            args_model=PdfExtractArgs,
            fn=make_pdf_extract_fn(limits),
            timeout_s=limits.timeout_s,
            read_only=True,
        )
    ]
