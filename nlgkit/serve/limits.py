"""What one request may ask of the server, and how long it may wait: ``nlgkit serve --limit key=value``.

A server must answer a bad or greedy request with a 4xx and keep serving everybody else, so every size it
accepts has a bound: bytes of a body, lines and characters of a translation request, images, their bytes
and pixels, the beam. Batching trades latency for throughput within bounds too: a batch waits at most
``max_wait_ms`` for company and holds at most ``max_batch`` lines or images, and at most ``queue_size``
requests may wait for a model; the next one gets a 503 rather than a place in a queue without end.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from nlgkit.core.config import from_dict
from nlgkit.core.errors import ConfigError
from nlgkit.core.recipes import parse_override


@dataclass(frozen=True)
class ServeLimits:
    """The bounds of ``nlgkit serve`` (each one a ``--limit key=value``)."""

    max_body_bytes: int = 1 << 20  # a /translate body (JSON)
    max_lines: int = 256  # lines of one /translate request
    max_line_chars: int = 2000  # characters of one line
    max_images: int = 8  # images of one /caption request
    max_image_bytes: int = 10 << 20  # bytes of one uploaded image
    max_pixels: int = 40_000_000  # width × height of one image (more: refused as a decompression bomb)
    max_decoding: int = 4  # uploads decoded at once (each may take 3 bytes per pixel until it is resized)
    max_beam: int = 16  # the widest beam a request may ask for
    max_batch: int = 64  # lines (or images) searched together at most
    max_wait_ms: float = 2.0  # how long a batch waits for more requests before it starts
    queue_size: int = 64  # requests waiting per model; one more is answered 503

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value < 0 or (value == 0 and item.name != "max_wait_ms"):
                raise ConfigError(f"--limit {item.name}={value}: must be positive")

    @property
    def max_caption_body_bytes(self) -> int:
        """A /caption body: its images and a little room for the form's other fields and boundaries."""
        return self.max_images * self.max_image_bytes + (64 << 10)

    def describe(self) -> dict[str, float]:
        return asdict(self)


def parse_limits(overrides: list[str]) -> ServeLimits:
    """``key=value`` overrides (values read as TOML) on top of the defaults; an unknown key or a wrong type is
    a ConfigError naming it."""
    data: dict[str, object] = {}
    for text in overrides:
        path, value = parse_override(text)
        if len(path) != 1:
            raise ConfigError(f"--limit {text!r}: expected key=value (keys: "
                              f"{', '.join(f.name for f in fields(ServeLimits))})")
        data[path[0]] = value
    limits: ServeLimits = from_dict(ServeLimits, data, "", "--limit")
    return limits
