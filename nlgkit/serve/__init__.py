"""``nlgkit serve``: trained runs behind an HTTP API and a web page (FastAPI on uvicorn).

``served`` loads each run once and searches with :mod:`nlgkit.generation`; ``batching`` groups concurrent
requests into bounded batches behind a bounded queue; ``inputs`` and ``limits`` check every request before a
model sees it; ``app`` maps it all to endpoints; ``static/`` is the page. Only the CLI imports this package.
"""
