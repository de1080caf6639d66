"""Seeded random matrices that any layer can regenerate (fixed heads, random word-vector tables)."""

from __future__ import annotations

import torch


def regenerable_generator(seed: int) -> torch.Generator:
    """A CPU generator for fixed random matrices: the same seed gives the same matrix on any device."""
    generator = torch.Generator(device="cpu")
    generator.manual_seed(seed)
    return generator
