"""Output heads. Each module registers one head in ``HEADS``; importing it here makes it available."""

from nlgkit.heads.base import HeadContext, OutputHead
from nlgkit.core.registry import Registry

HEADS: Registry[OutputHead] = Registry("head")

# Plain imports, one per head: each module registers itself in HEADS.
from nlgkit.heads import continuous as _continuous  # noqa: F401
from nlgkit.heads import fixed as _fixed  # noqa: F401
from nlgkit.heads import hadamard as _hadamard  # noqa: F401
from nlgkit.heads import joint as _joint  # noqa: F401
from nlgkit.heads import learned as _learned  # noqa: F401
from nlgkit.heads import tied as _tied  # noqa: F401


def build_head(config, context: HeadContext) -> OutputHead:  # type: ignore[no-untyped-def]
    """Create the head selected by ``config.type`` (with its ``[head.sampling]`` share for training)."""
    head = HEADS.build(config, context=context)
    sampling = getattr(config, "sampling", None)
    if sampling is not None:
        head.sampling_share = sampling.share
    return head


__all__ = ["HEADS", "HeadContext", "OutputHead", "build_head"]
