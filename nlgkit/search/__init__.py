"""Decoding: one batched beam search (and its greedy special case) for every model and head."""

from nlgkit.search.beam import Hypothesis, beam_search, greedy_search, search

__all__ = ["Hypothesis", "beam_search", "greedy_search", "search"]
