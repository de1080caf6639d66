"""Decoding: one batched beam search (and its greedy special case) for every model and head, its lexically
constrained form, and sampling."""

from nlgkit.search.beam import Hypothesis, beam_search, greedy_search, search
from nlgkit.search.sampling import Sampling, sample_search
from nlgkit.search.steps import Rules

__all__ = ["Hypothesis", "Rules", "Sampling", "beam_search", "greedy_search", "sample_search", "search"]
