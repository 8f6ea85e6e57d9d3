"""Unit tests for the `pdf_extract` tool (meshward.tools.pdf): real PDFs built here, hostile ones too."""

from __future__ import annotations

import base64
import io
import os
import threading
import time
import zlib

import pypdf
import pytest
from meshward.contracts import DataContent, ErrorCode, TextContent
from meshward.tools import pdf as pdf_mod
from meshward.tools.pdf import MAX_REQUESTED_PAGES, PdfLimits, decode_pdf, extract_text, tools
from meshward.tools.registry import ToolError, ToolRegistry

# --------------------------------------------------------------------------- building real PDFs by hand


def _text_stream(text: str) -> bytes:
    ops = [b"BT", b"/F1 12 Tf", b"72 720 Td", b"14 TL"]
    for line in text.split("\n"):
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(b"(" + escaped.encode("latin-1") + b") Tj T*")
    ops.append(b"ET")
    return b"\n".join(ops)


def build_pdf(page_streams: list[bytes], *, compress: bool = False, shared_content: bool = False) -> bytes:
    """A minimal valid PDF: catalog, page tree, one Helvetica font, one content stream per page (xref offsets exact)."""
    objs: dict[int, bytes] = {}
    n = len(page_streams)
    objs[3] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    kids = []
    next_id = 4
    content_ids: list[int] = []
    for i, stream in enumerate(page_streams):
        if shared_content and i > 0:
            content_ids.append(content_ids[0])
            continue
        data = zlib.compress(stream, 9) if compress else stream
        flt = b" /Filter /FlateDecode" if compress else b""
        objs[next_id] = b"<< /Length %d%s >>\nstream\n" % (len(data), flt) + data + b"\nendstream"
        content_ids.append(next_id)
        next_id += 1
    for i in range(n):
        objs[next_id] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>"
            % content_ids[i]
        )
        kids.append(b"%d 0 R" % next_id)
        next_id += 1
    objs[1] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objs[2] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % n
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for num in sorted(objs):
        offsets[num] = len(out)
        out += b"%d 0 obj\n" % num + objs[num] + b"\nendobj\n"
    xref = len(out)
    size = max(objs) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for num in range(1, size):
        out += b"%010d 00000 n \n" % offsets[num]
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    return bytes(out)


def text_pdf(texts: list[str], **kw) -> bytes:
    return build_pdf([_text_stream(t) for t in texts], **kw)


def encrypt(pdf: bytes, *, user_password: str, owner_password: str = "owner") -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password=user_password, owner_password=owner_password, algorithm="RC4-128")  # no extra deps
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    for tool in tools():
        reg.register(tool)
    return reg


async def extract(registry: ToolRegistry, data: bytes | str, **kw):
    content = data if isinstance(data, str) else b64(data)
    return await registry.call("pdf_extract", {"content_base64": content, **kw})


async def expect_error(registry, data, code: ErrorCode, *, match: str = "", **kw) -> ToolError:
    with pytest.raises(ToolError) as err:
        await extract(registry, data, **kw)
    assert err.value.code == code, err.value.message
    assert match.lower() in err.value.message.lower()
    return err.value


THREE = ["Hello world (page one)", "Second page\nline two", "Third page: the end"]

# --------------------------------------------------------------------------- happy paths


async def test_extracts_all_pages_with_separators(registry):
    result = await extract(registry, text_pdf(THREE))
    text, data = result.content
    assert isinstance(text, TextContent) and isinstance(data, DataContent)
    assert (
        text.text.index("--- page 1 ---")
        < text.text.index("Hello world (page one)")
        < text.text.index("--- page 2 ---")
    )
    assert "Second page\nline two" in text.text and "Third page: the end" in text.text
    assert data.data["pages"] == 3
    assert data.data["extracted_pages"] == [1, 2, 3]
    assert data.data["truncated"] is False
    assert data.data["encrypted"] is False


async def test_selected_pages_sorted_and_deduplicated(registry):
    result = await extract(registry, text_pdf(THREE), pages=[3, 1, 3])
    text, data = result.content
    assert data.data["extracted_pages"] == [1, 3]
    assert "--- page 2 ---" not in text.text and "Second page" not in text.text
    assert text.text.index("--- page 1 ---") < text.text.index("--- page 3 ---")


async def test_compressed_streams(registry):
    result = await extract(registry, text_pdf(THREE, compress=True))
    assert "Third page: the end" in result.content[0].text


async def test_wrapped_base64_and_data_url_accepted(registry):
    raw = b64(text_pdf(THREE))
    wrapped = "\n".join(raw[i : i + 76] for i in range(0, len(raw), 76))
    assert "Hello world" in (await extract(registry, wrapped)).content[0].text
    assert "Hello world" in (await extract(registry, "data:application/pdf;base64," + raw)).content[0].text
    assert "Hello world" in (await extract(registry, raw.rstrip("="))).content[0].text  # missing padding tolerated


async def test_page_without_text(registry):
    pdf = build_pdf([b"0 0 m 100 100 l S", _text_stream("words")])
    result = await extract(registry, pdf)
    assert "no extractable text" in result.content[0].text
    assert result.content[1].data["empty_pages"] == [1]


async def test_owner_password_only_pdf_is_readable(registry):
    pdf = encrypt(text_pdf(THREE), user_password="")
    result = await extract(registry, pdf)
    assert "Hello world" in result.content[0].text
    assert result.content[1].data["encrypted"] is True


# --------------------------------------------------------------------------- caps and truncation


async def test_many_pages_capped_at_max_pages(registry):
    pdf = text_pdf([f"page number {i}" for i in range(1, 151)])
    result = await extract(registry, pdf)
    text, data = result.content
    assert data.data["pages"] == 150
    assert data.data["extracted_pages"] == list(range(1, 101))
    assert data.data["truncated"] is True
    assert "page number 100" in text.text and "page number 101" not in text.text
    assert "ask for specific pages" in text.text
    # later pages are reachable explicitly
    result = await extract(registry, pdf, pages=[150, 120])
    assert result.content[1].data["extracted_pages"] == [120, 150]
    assert "page number 150" in result.content[0].text


async def test_per_page_and_total_char_caps():
    limits = PdfLimits(max_page_chars=1_000, max_total_chars=2_500)
    reg = ToolRegistry()
    reg.register(tools(limits)[0])
    pdf = text_pdf(["\n".join(["word " * 20] * 100)] * 5)  # ~10k chars a page
    result = await extract(reg, pdf)
    text, data = result.content
    assert data.data["truncated"] is True
    assert data.data["chars"] <= 2_500
    assert data.data["extracted_pages"] == [1, 2, 3]  # 1000 + 1000 + 500
    assert len(text.text) < 2_500 + 500  # separators and the note


async def test_default_total_cap(registry):
    pdf = text_pdf(["\n".join(["lorem ipsum dolor " * 5] * 60)] * 40)  # ~5.4k chars x 40 pages
    result = await extract(registry, pdf)
    assert result.content[1].data["chars"] <= 100_000
    assert result.content[1].data["truncated"] is True


# --------------------------------------------------------------------------- bad input: bad_request


async def test_random_bytes_not_a_pdf(registry):
    await expect_error(registry, os.urandom(4096), ErrorCode.BAD_REQUEST, match="not a PDF")


async def test_invalid_base64(registry):
    await expect_error(registry, "this is *not* base64!!", ErrorCode.BAD_REQUEST, match="not valid base64")


async def test_garbage_after_pdf_header(registry):
    await expect_error(registry, b"%PDF-1.7\n" + os.urandom(4096), ErrorCode.BAD_REQUEST, match="malformed")


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.9])
async def test_truncated_pdf(registry, fraction):
    pdf = text_pdf(THREE, compress=True)
    await expect_error(registry, pdf[: int(len(pdf) * fraction)], ErrorCode.BAD_REQUEST, match="malformed")


async def test_encrypted_pdf(registry):
    pdf = encrypt(text_pdf(THREE), user_password="s3cret")
    await expect_error(registry, pdf, ErrorCode.BAD_REQUEST, match="encrypted")


async def test_missing_page(registry):
    await expect_error(registry, text_pdf(THREE), ErrorCode.BAD_REQUEST, match="page 7 does not exist", pages=[1, 7])


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"content_base64": ""},
        {"content_base64": "JVBERi0=", "pages": [0]},
        {"content_base64": "JVBERi0=", "password": "x"},
    ],
)
async def test_argument_validation(registry, arguments):
    with pytest.raises(ToolError) as err:
        await registry.call("pdf_extract", arguments)
    assert err.value.code == ErrorCode.BAD_REQUEST


# --------------------------------------------------------------------------- bounds: too_large


def spy_content_parsing(monkeypatch) -> list[dict]:
    """Record every content-stream parse pypdf starts: how many operations it parsed, and how it ended."""
    parses: list[dict] = []
    real = pypdf.generic.ContentStream._parse_content_stream

    def spy(self, stream):
        record = {"operations": 0, "error": None}
        parses.append(record)
        try:
            return real(self, stream)
        except Exception as e:
            record["error"] = str(e)
            raise
        finally:
            record["operations"] = len(self._operations)

    monkeypatch.setattr(pypdf.generic.ContentStream, "_parse_content_stream", spy)
    return parses


async def test_oversized_base64_rejected_before_decoding(registry, monkeypatch):
    def no_decode(*_a, **_k):
        raise AssertionError("decoded an oversized payload")

    class NoNormalising:
        def sub(self, *_a, **_k):
            raise AssertionError("normalised (copied) an oversized payload")

    def no_parse(*_a, **_k):
        raise AssertionError("parsed an oversized payload")

    monkeypatch.setattr(pdf_mod.base64, "b64decode", no_decode)
    monkeypatch.setattr(pdf_mod, "_DATA_URL", NoNormalising())  # the first step after the raw length check
    monkeypatch.setattr(pdf_mod, "extract_text", no_parse)
    await expect_error(registry, "A" * 15_000_000, ErrorCode.TOO_LARGE, match="10 MB")


def test_decoded_size_limit():
    limits = PdfLimits(max_bytes=2_000)
    pdf = text_pdf(["x" * 50] * 30)
    assert len(pdf) > 2_000
    with pytest.raises(ToolError) as err:
        decode_pdf(b64(pdf), limits)
    assert err.value.code == ErrorCode.TOO_LARGE


async def test_too_many_requested_pages(registry):
    pages = list(range(1, MAX_REQUESTED_PAGES + 2))
    await expect_error(
        registry, text_pdf(THREE), ErrorCode.TOO_LARGE, match=f"at most {MAX_REQUESTED_PAGES}", pages=pages
    )


async def test_decompression_bomb(registry, monkeypatch):
    # ~30 KB on the wire, 21 MB once inflated: stopped at the per-stream inflate limit, before any parsing.
    bomb = build_pdf([b"BT /F1 12 Tf 72 720 Td " + b"(A) Tj " * 3_000_000 + b"ET"], compress=True)
    assert len(bomb) < 50_000
    parses = spy_content_parsing(monkeypatch)
    err = await expect_error(registry, bomb, ErrorCode.TOO_LARGE, match="possible PDF bomb")
    assert "Limit reached while decompressing" in err.message  # pypdf's inflate cap (max_stream_bytes) fired
    assert parses == []  # inflating stopped at the limit, so the content stream was never parsed nor interpreted


async def test_parse_work_bomb(monkeypatch):
    # Inflates to under the byte limit but is all tiny tokens: pypdf's parse budget (tightened here) stops it.
    reg = ToolRegistry()
    reg.register(tools(PdfLimits(max_stream_tokens=50_000))[0])
    bomb = build_pdf([b"BT /F1 12 Tf 72 720 Td " + b"(A) Tj " * 200_000 + b"ET"], compress=True)
    parses = spy_content_parsing(monkeypatch)
    await expect_error(reg, bomb, ErrorCode.TOO_LARGE, match="possible PDF bomb")
    # one parse of the one content stream, stopped by the token budget after at most 50k of its 400k+ tokens
    (parse,) = parses
    assert parse["error"] == "Reached maximum number of tokens per stream."
    assert parse["operations"] <= 50_000


async def test_operator_budgets():
    heavy = b"BT /F1 12 Tf 72 720 Td " + b"1 0 0 1 0 0 cm " * 5_000 + b"(tail) Tj ET"
    reg = ToolRegistry()
    reg.register(tools(PdfLimits(max_page_operators=2_000))[0])
    await expect_error(reg, build_pdf([heavy]), ErrorCode.TOO_LARGE, match="drawing operators")
    # the same heavy page repeated: each page is fine, the per-call total is not
    reg = ToolRegistry()
    reg.register(tools(PdfLimits(max_total_operators=12_000))[0])
    await expect_error(reg, build_pdf([heavy] * 5, shared_content=True), ErrorCode.TOO_LARGE, match="in total")


def test_cancelled_extraction_stops():
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(pdf_mod._Stop):
        extract_text(text_pdf(THREE), None, PdfLimits(), cancel)


async def test_tool_timeout_is_deadline_exceeded(monkeypatch):
    started = threading.Event()

    def slow(data, pages, limits, cancel):
        started.set()
        while not cancel.is_set():
            time.sleep(0.01)
        raise pdf_mod._Stop("cancelled")

    monkeypatch.setattr(pdf_mod, "extract_text", slow)
    reg = ToolRegistry()
    reg.register(tools(PdfLimits(timeout_s=0.3))[0])
    with pytest.raises(ToolError) as err:
        await extract(reg, text_pdf(THREE))
    assert err.value.code == ErrorCode.DEADLINE_EXCEEDED
    assert started.wait(5)  # the worker ran (or runs late) and exits on the cancel flag instead of looping forever


# --------------------------------------------------------------------------- schema


def test_schema():
    (tool,) = tools()
    schema = tool.spec().input_schema
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["content_base64"]
    assert schema["properties"]["pages"]["anyOf"][0]["maxItems"] == MAX_REQUESTED_PAGES
    assert schema["properties"]["content_base64"]["maxLength"] >= 10 * 1024 * 1024
