"""Output heads: one protocol (``base.OutputHead``), one small file per head.

Each head module registers itself in ``nlgkit.core.registry.HEADS``; the built-in ones are listed as entry
points in ``pyproject.toml`` and imported when a config first asks for a head.
"""

from nlgkit.core.registry import HEADS
from nlgkit.heads.base import HeadConfig, HeadContext, OutputHead, SamplingConfig, build_head

__all__ = ["HEADS", "HeadConfig", "HeadContext", "OutputHead", "SamplingConfig", "build_head"]
