"""``nlgkit serve``: the trained runs behind an HTTP API and a web page (FastAPI on uvicorn).

Every model is loaded, and the address bound, before the server starts: a run that does not load, or a
port already taken, stops the command with one ``error:`` line. The app is :mod:`nlgkit.serve`; this
module parses and prints.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import handle_errors


@handle_errors
def serve(
    model: Annotated[list[str], typer.Option(
        "--model", "-m", help="Run directory to serve, as RUN_DIR or NAME=RUN_DIR (repeat for more models; "
                              "each is selected by its name); RUN_A+RUN_B serves an ensemble of those runs; "
                              "a CTranslate2 export (nlgkit export ct2) is searched by CTranslate2")],
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port, printed at start)")] = 8080,
    checkpoint: Annotated[str, typer.Option(help="best, last, or a checkpoint directory")] = "best",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N")] = "auto",
    compute_type: Annotated[str, typer.Option(help="What the searches compute in: float32 (default), bfloat16 or "
                                                   "float16 autocast; an export: CTranslate2's types (int8…)")
                            ] = "default",
    limit: Annotated[list[str] | None, typer.Option(
        "--limit", metavar="KEY=VALUE", help="A request or batching bound, e.g. max_lines=64, max_wait_ms=2, "
                                             "queue_size=32 (see GET /models for all)")] = None,
    threads: Annotated[int, typer.Option(min=0, help="CPU threads of the searches (0: one fewer than the cores, "
                                                     "at least 1: a core is left to the HTTP side)")] = 0,
    access_log: Annotated[bool, typer.Option(help="Log every request")] = False,
    ensemble_mode: Annotated[str, typer.Option(help="For RUN_A+RUN_B: log_linear (mean log-probability) or linear "
                                                    "(log of the mean probability)")] = "log_linear",
    replace_unk: Annotated[bool, typer.Option(help="Translation models replace each <unk> by the source token its "
                                                   "step attended to most (as translate --replace-unk)")] = False,
    phrase_table: Annotated[Path | None, typer.Option(help="--replace-unk through this table of 'source|||target' "
                                                           "lines")] = None,
) -> None:
    """Serve trained runs over HTTP: POST /translate, POST /caption, GET /models, GET /health, and a page at /."""
    # lazy: CLI start-up (FastAPI, uvicorn, torch and the models load only when the command runs)
    import uvicorn

    # lazy: the library, as above
    from nlgkit.core.errors import DataError
    from nlgkit.generation.unknowns import phrase_table_option
    from nlgkit.serve.app import create_app
    from nlgkit.serve.limits import parse_limits
    from nlgkit.serve.served import load_models, set_threads

    logging.getLogger("python_multipart").setLevel(logging.ERROR)  # a malformed upload is the client's 4xx
    limits = parse_limits(limit or [])
    if not 0 <= port <= 65535:
        raise DataError(f"--port {port}: expected 0 to 65535")
    table = phrase_table_option(replace_unk, phrase_table)
    threads = set_threads(threads)  # before loading: a CTranslate2 export takes its thread count when loaded
    models = load_models(model, checkpoint, device, limits, ensemble_mode, table, compute_type)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        raise DataError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})") from None
    # answers go out in several writes (headers, body): without TCP_NODELAY each small answer waits for the
    # client's delayed ACK (about 40 ms on Linux); accepted connections inherit the option
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    bound = listener.getsockname()[1]
    names = ", ".join(f"{m.name} ({m.config.task.type}{', CTranslate2' * (m.engine == 'ct2')} → /{m.does})"
                      for m in models.values())
    typer.echo(f"serving {names} with {threads} search thread{'s' * (threads > 1)} on http://{host}:{bound}/",
               err=True)
    config = uvicorn.Config(create_app(models, limits), log_level="warning", access_log=access_log,
                            timeout_graceful_shutdown=10)
    uvicorn.Server(config).run(sockets=[listener])
