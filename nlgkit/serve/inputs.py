"""Reading requests: every body is checked against the limits before a model sees it.

Whatever a client sends (random bytes, a body larger than the limit, text that is not UTF-8, JSON that is
not the request's shape, a form without images) becomes a :class:`RequestError`: an HTTP status and one
line saying what is wrong and where. The shapes are pydantic models, so their errors name the field.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.datastructures import FormData, Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import ClientDisconnect, Request

from nlgkit.serve.limits import ServeLimits

CLIENT_GONE = 499  # the status logged for a client that left before its answer (nginx's "client closed request")


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx) and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = " ".join(message.split())


class TranslateRequest(BaseModel):
    """``POST /translate``: ``{"lines": [...], "model": NAME, "beam": N, "nbest": N, "scores": bool, "align":
    bool, "token_scores": bool}``, the search constraints ``min_len`` and ``no_repeat_ngram_size``,
    ``target_prefix``: per line, the text its outputs start with (``translate --target-prefix``), and
    ``constraints``: per line, the phrases its outputs must contain (``translate --constraints``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    lines: list[str]
    model: str | None = None  # default: the first served translation model
    beam: int | None = None  # default: the run's [search] beam
    nbest: int | None = None  # hypotheses per line (default: the run's [search] nbest)
    scores: bool = False  # add each hypothesis's score
    align: bool = False  # add the line's source tokens, each hypothesis's tokens and their alignment
    token_scores: bool = False  # add each hypothesis's tokens and their log-scores (the EOS's last)
    min_len: int | None = None  # default: the run's [search]
    no_repeat_ngram_size: int | None = None  # default: the run's [search]
    target_prefix: list[str] | None = None  # one prefix per line (an empty string: none)
    constraints: list[list[str]] | None = None  # one list of phrases per line (an empty list: none)


@dataclass(frozen=True)
class CaptionRequest:
    """``POST /caption`` (multipart): the image files in order, and the form's ``model``, ``beam``, ``nbest``,
    ``attention``, ``min_len``, ``no_repeat_ngram_size``, ``token_scores`` and ``target_prefix`` fields."""

    images: list[tuple[str, bytes]]  # (display name, bytes)
    model: str | None = None
    beam: int | None = None
    nbest: int | None = None
    attention: bool = False
    min_len: int | None = None
    no_repeat_ngram_size: int | None = None
    token_scores: bool = False  # each caption's tokens and their log-scores (the EOS's last)
    target_prefix: str = ""  # the words every caption starts with (caption --target-prefix; "": none)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused (413) as soon as it is known to exceed ``limit`` bytes: by its Content-Length when
    it declares one, else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise RequestError(400, f"Content-Length {declared[:40]!r} is not a number")
        if int(declared) > limit:
            raise RequestError(413, f"request body of {int(declared):,} bytes: at most {limit:,} bytes")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(413, f"request body over {limit:,} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # the client's mistake, not the server's: no 500, no traceback in the log
        raise RequestError(CLIENT_GONE, f"the client closed the connection after {size:,} bytes of its "
                                        "request body") from None
    body = b"".join(chunks)
    request._body = body  # Starlette's own cache: request.form() reads the body again from here
    return body


def parse_translate(body: bytes, limits: ServeLimits) -> TranslateRequest:
    """A /translate body → its request, or the RequestError that names what is wrong."""
    if not body.strip():
        raise RequestError(400, 'empty request body: expected JSON {"lines": [...]}')
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(400, f"request body is not UTF-8 (byte {exc.start})") from None
    try:
        request = TranslateRequest.model_validate_json(text)
    except ValidationError as exc:
        raise RequestError(422, validation_message(exc)) from None
    if not request.lines:
        raise RequestError(422, "lines: empty list: nothing to translate")
    if len(request.lines) > limits.max_lines:
        raise RequestError(413, f"lines: {len(request.lines):,} lines: at most {limits.max_lines} per request")
    check_line_lengths("lines", [len(line) for line in request.lines], limits)
    if request.target_prefix is not None:
        check_one_per_line("target_prefix", len(request.target_prefix), "prefixes", len(request.lines))
        check_line_lengths("target_prefix", [len(prefix) for prefix in request.target_prefix], limits)
    if request.constraints is not None:
        check_one_per_line("constraints", len(request.constraints), "lists", len(request.lines))
        for number, phrases in enumerate(request.constraints, start=1):
            if any("\t" in phrase for phrase in phrases):
                raise RequestError(422, f"constraints: line {number}: a phrase holds a tab")
        check_line_lengths("constraints", [sum(map(len, phrases)) for phrases in request.constraints], limits)
    return request


def check_one_per_line(field: str, count: int, what: str, lines: int) -> None:
    """A per-line field (prefixes, constraints) has exactly one entry per line: 422 otherwise."""
    if count != lines:
        raise RequestError(422, f"{field}: {count} {what} for {lines} lines (one per line)")


def check_line_lengths(field: str, lengths: list[int], limits: ServeLimits) -> None:
    """Each line's characters in ``field`` (a line, its prefix, its phrases together) within the line limit: 413."""
    for number, length in enumerate(lengths, start=1):
        if length > limits.max_line_chars:
            raise RequestError(413, f"{field}: line {number}: {length:,} characters: at most "
                                    f"{limits.max_line_chars:,}")


def validation_message(exc: ValidationError) -> str:
    """A pydantic error as one line: the first problem with its field path (and how many more there are)."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where + ': ' if where else ''}{first['msg']}{more}"


async def parse_caption(request: Request, limits: ServeLimits) -> CaptionRequest:
    """A /caption multipart form → its request; a malformed form, a missing or oversized image, an unknown
    field or a bad number is a RequestError."""
    await read_body(request, limits.max_caption_body_bytes)
    if not request.headers.get("content-type", "").strip().lower().startswith("multipart/form-data"):  # any case
        raise RequestError(415, "expected a multipart/form-data upload with one or more image files")
    # Starlette's own bounds are set past ours (the body is already bounded by max_caption_body_bytes), so that a
    # request over a limit is told which limit, with a 413, not "400 Too many files. Maximum number of files is 8."
    body_bound = limits.max_caption_body_bytes
    try:
        async with aclosing(request.stream()) as stream:
            parser = TextCheckingParser(request.headers, stream, bound=body_bound)
            form = await parser.parse()
    except MultiPartException as exc:  # (what request.form() answers with a 400 HTTPException)
        raise RequestError(400, exc.message) from None
    try:
        if parser.undecodable:
            field, (start, charset) = next(iter(parser.undecodable.items()))
            raise RequestError(422, f"{field[:40]}: not {'UTF-8' if charset == 'utf-8' else charset} (byte "
                                    f"{start} of the field)")
        return await _caption_request(form, limits)
    finally:
        await form.close()


class TextCheckingParser(MultiPartParser):
    """Starlette's multipart parser, remembering each text field that is not in the form's charset (UTF-8 unless
    the Content-Type names another): Starlette reads such a field as Latin-1 and goes on, so that a client's
    mis-encoded prefix would silently prefix every caption with other letters."""

    def __init__(self, headers: Headers, stream: AsyncGenerator[bytes, None], *, bound: int) -> None:
        super().__init__(headers, stream, max_files=bound, max_fields=bound, max_part_size=bound)
        self.undecodable: dict[str, tuple[int, str]] = {}  # field name → (first bad byte, the charset)

    def on_part_end(self) -> None:
        part = self._current_part
        if part.file is None:
            try:
                part.data.decode(self._charset)
            except UnicodeDecodeError as exc:
                self.undecodable.setdefault(part.field_name, (exc.start, self._charset))
        super().on_part_end()


CAPTION_FIELDS = ("model", "beam", "nbest", "attention", "min_len", "no_repeat_ngram_size", "token_scores",
                  "target_prefix")


async def _caption_request(form: FormData, limits: ServeLimits) -> CaptionRequest:
    images: list[tuple[str, bytes]] = []
    fields: dict[str, str] = {}
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            number = f"image {len(images) + 1}"
            name = " ".join((value.filename or number).split())[:120] or number  # one line, and not too long
            if len(images) == limits.max_images:
                raise RequestError(413, f"more than {limits.max_images} images: at most {limits.max_images} a "
                                        "request (max_images)")
            data = await value.read(limits.max_image_bytes + 1)
            if len(data) > limits.max_image_bytes:
                raise RequestError(413, f"image {name!r}: over {limits.max_image_bytes:,} bytes")
            images.append((name, data))
        elif key in fields:
            raise RequestError(422, f"form field {key!r} given twice")
        elif key in CAPTION_FIELDS:
            fields[key] = value
        else:
            raise RequestError(422, f"unknown form field {key[:40]!r} (expected image files and "
                                    f"{', '.join(CAPTION_FIELDS)})")
    if not images:
        raise RequestError(422, "no image uploaded: send one or more files (multipart field 'image')")
    prefix = fields.get("target_prefix", "").strip()
    if len(prefix) > limits.max_line_chars:
        raise RequestError(413, f"target_prefix: {len(prefix):,} characters: at most {limits.max_line_chars:,}")
    return CaptionRequest(images, fields.get("model") or None, _integer(fields, "beam"), _integer(fields, "nbest"),
                          _flag(fields, "attention"), _integer(fields, "min_len"),
                          _integer(fields, "no_repeat_ngram_size"), _flag(fields, "token_scores"), prefix)


def _integer(fields: dict[str, str], key: str) -> int | None:
    text = fields.get(key, "").strip()
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 6:
        raise RequestError(422, f"{key}: {text[:20]!r} is not a positive integer")
    return int(text)


def _flag(fields: dict[str, str], key: str) -> bool:
    text = fields.get(key, "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False
    if text in ("1", "true", "yes", "on"):
        return True
    raise RequestError(422, f"{key}: {text[:20]!r} is not true or false")
