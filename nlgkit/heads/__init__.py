"""Output heads. Each module registers one head in ``HEADS``; importing it here makes it available."""

from nlgkit.heads.base import HeadContext, OutputHead
from nlgkit.registry import Registry

HEADS: Registry[OutputHead] = Registry("head")

# Plain imports, one per head: each module registers itself in HEADS.
from nlgkit.heads import fixed as _fixed  # noqa: F401
from nlgkit.heads import hadamard as _hadamard  # noqa: F401
from nlgkit.heads import joint as _joint  # noqa: F401
from nlgkit.heads import learned as _learned  # noqa: F401
from nlgkit.heads import tied as _tied  # noqa: F401


def build_head(config, context: HeadContext) -> OutputHead:  # type: ignore[no-untyped-def]
    """Create the head selected by ``config.type``."""
    return HEADS.build(config, context=context)


__all__ = ["HEADS", "HeadContext", "OutputHead", "build_head"]
