"""The HTTP app of ``nlgkit serve``: four endpoints and a web page over the served models.

- ``POST /translate`` JSON ``{"lines": [...], "model", "beam", "nbest", "scores", "min_len",
  "no_repeat_ngram_size"}`` → ``{"model", "translations": [{"text", "score"?, "nbest"?: [{"text", "score"?}]}]}``,
  one per line, in order;
- ``POST /caption`` multipart image files (+ ``model``, ``beam``, ``nbest``, ``attention``, ``min_len``,
  ``no_repeat_ngram_size`` fields) →
  ``{"model", "results": [{"image", "captions": [{"text", "score"}], "attention_png"?}]}``;
- ``GET /models`` (what each served model does) and ``GET /health``; ``GET /`` the page (``static/``).

Errors are JSON ``{"error": "one line"}`` with a 4xx status: 400 unreadable body, 404 unknown model or
path, 405 a method the path does not take (both name the method and path), 413 over a limit, 415 not a
multipart upload, 422 a body of the wrong shape or a model that does not do what is asked; 503 (with
Retry-After) when the model's queue is full. A client that disconnects before its answer gets (in the access
log) a 499, and its request, if still queued, is dropped unsearched. A failure of the server itself is a 500
with one line, logged with its traceback; it never ends the server. The GET endpoints answer HEAD too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import Future
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import torch
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from nlgkit.core.errors import NlgkitError
from nlgkit.serve.batching import QueueFull
from nlgkit.serve.inputs import CLIENT_GONE, RequestError, parse_caption, parse_translate, read_body
from nlgkit.serve.limits import ServeLimits
from nlgkit.serve.served import CAPTION, TRANSLATE, ServedModel

LOG = logging.getLogger("nlgkit.serve")
STATIC = Path(__file__).resolve().parent / "static"


def create_app(models: Mapping[str, ServedModel], limits: ServeLimits | None = None) -> FastAPI:
    """The app over ``models`` (loaded already); their batchers run while the app does (its lifespan)."""
    limits = limits or ServeLimits()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for model in models.values():
            model.batcher.start()
        try:
            yield
        finally:
            for model in models.values():
                await run_in_threadpool(model.batcher.stop)

    app = FastAPI(title="nlgkit serve", lifespan=lifespan, docs_url=None, redoc_url=None)  # no CDN pages
    add_error_handlers(app)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    decoding = asyncio.Semaphore(limits.max_decoding)  # full-size pictures in memory at once

    @app.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse)  # HEAD: what uptime checks send
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health() -> dict[str, Any]:
        return {"status": "ok", "search_threads": torch.get_num_threads(),
                "models": {name: {"waiting": m.batcher.waiting, "batches": m.batcher.batches}
                           for name, m in models.items()}}

    @app.api_route("/models", methods=["GET", "HEAD"])
    async def list_models() -> dict[str, Any]:
        return {"models": [m.describe() for m in models.values()], "limits": limits.describe()}

    @app.post("/translate")
    async def translate(request: Request) -> dict[str, Any]:
        body = parse_translate(await read_body(request, limits.max_body_bytes), limits)
        model = pick(models, body.model, TRANSLATE)
        options = model.options(body.beam, body.nbest, body.min_len, body.no_repeat_ngram_size)
        key = (options, body.align, body.token_scores, body.scores)
        if body.constraints is not None and model.engine != "torch":
            raise RequestError(422, f"constraints: model {model.name!r} is a CTranslate2 export, which has no "
                                    "lexically constrained search")
        prefixes, phrases, warnings = await run_in_threadpool(model.read_targets, body.lines, body.target_prefix,
                                                              body.constraints, options)
        items = list(zip(body.lines, phrases, prefixes, strict=True))
        found = await answered(request, model.batcher.submit(key, items))
        return {"model": model.name, "translations": found, **({"warnings": warnings} if warnings else {})}

    @app.post("/caption")
    async def caption(request: Request) -> dict[str, Any]:
        body = await parse_caption(request, limits)
        model = pick(models, body.model, CAPTION)
        options = model.options(body.beam, body.nbest, body.min_len, body.no_repeat_ngram_size)
        if body.attention and not model.attention:
            raise RequestError(422, f"attention: model {model.name!r} ({model.config.model.type}) has no "
                                    "attention to draw (show_attend_tell has)")
        model.batcher.check_room()  # a full queue refuses before the uploads are decoded
        pictures = []
        for name, data in body.images:
            async with decoding:
                pictures.append(await run_in_threadpool(model.read_picture, name, data))
        prefix, warnings = await run_in_threadpool(model.read_prefix, body.target_prefix)
        answers = await answered(request, model.batcher.submit(
            (options, body.attention, body.token_scores, tuple(prefix)), pictures))
        return {"model": model.name, "results": [{"image": p.name, **answer} for p, answer in zip(pictures, answers)],
                **({"warnings": warnings} if warnings else {})}

    return app


async def answered(request: Request, job: Future[list[Any]]) -> list[Any]:
    """The answers of a queued job; a client that disconnects before they come cancels its job, so that the worker
    skips it rather than search for nobody (a batch already running finishes; its answers are dropped)."""
    answers = asyncio.wrap_future(job)
    gone = asyncio.ensure_future(disconnected(request))
    try:
        await asyncio.wait((answers, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not answers.done():
        answers.cancel()  # cancels the job too, unless its batch has started
        raise RequestError(CLIENT_GONE, "the client closed the connection before its answer")
    return answers.result()


async def disconnected(request: Request) -> None:
    """Return when the client of a request whose body has been read goes away (the server's next ASGI message)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def pick(models: Mapping[str, ServedModel], name: str | None, does: str) -> ServedModel:
    """The model a request names (404 when none is served by that name; 422 when it does another task), or
    the first served model that does ``does``."""
    if name is None:
        for model in models.values():
            if model.does == does:
                return model
        served = ", ".join(f"{m.name} ({m.config.task.type})" for m in models.values())
        raise RequestError(422, f"no served model does /{does} (served: {served})")
    if name not in models:
        raise RequestError(404, f"model {name[:80]!r} is not served (served: {', '.join(models)})")
    model = models[name]
    if model.does != does:
        needs = "reads text" if does == TRANSLATE else "reads images"
        raise RequestError(422, f"model {name!r} is a {model.config.task.type!r} model, served at "
                                f"/{model.does}: /{does} needs a model that {needs}")
    return model


def add_error_handlers(app: FastAPI) -> None:
    """Every error as ``{"error": "one line"}`` with its status."""

    def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": " ".join(str(message).split())}, status_code=status, headers=headers)

    async def refused(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestError)
        return error(exc.status, exc.message)

    async def user_error(_: Request, exc: Exception) -> Response:  # a DataError from the search options…
        return error(400, str(exc))

    async def busy(_: Request, exc: Exception) -> Response:
        return error(503, str(exc), {"Retry-After": "1"})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = str(exc.detail)
        if exc.status_code in (404, 405):  # from the routing: name what was asked for, and what would do
            allowed = {k.lower(): v for k, v in (exc.headers or {}).items()}.get("allow")
            hint = f"allowed: {allowed}" if allowed else "endpoints: POST /translate, POST /caption, GET /models, /health, /"
            message = f"{request.method} {request.url.path[:200]}: {message} ({hint})"
        return error(exc.status_code, message, exc.headers)

    async def invalid(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        return error(422, f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}")

    async def crashed(_: Request, exc: Exception) -> Response:
        LOG.exception("internal error")
        return error(500, f"internal error: {type(exc).__name__}: {exc}")

    app.add_exception_handler(RequestError, refused)
    app.add_exception_handler(NlgkitError, user_error)
    app.add_exception_handler(QueueFull, busy)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(Exception, crashed)
