"""Analyses of a trained model's word vectors and size, as pure functions on tensors and vocabularies.

One module per question the output-layer papers ask: does a vector's norm encode frequency (``norms``),
do cosines match human similarity (``wordsim``), who are a word's neighbours (``neighbours``), how does
the neighbourhood change with frequency rank (``geometry``), and what does each component cost
(``params``). ``vectors`` extracts the input and target vector sets of a model; ``similarity`` does the
chunked cosine work; ``plots`` writes figures atomically. The CLI is in :mod:`nlgkit.cli.analyze`.
"""

from nlgkit.evaluate.analysis.geometry import bin_geometry, neighbour_geometry, rank_bins
from nlgkit.evaluate.analysis.neighbours import cosine_of_pairs, nearest_neighbours
from nlgkit.evaluate.analysis.norms import norm_frequency
from nlgkit.evaluate.analysis.params import parameter_report
from nlgkit.evaluate.analysis.vectors import VectorSet, vector_sets
from nlgkit.evaluate.analysis.wordsim import read_benchmark, word_similarity

__all__ = [
    "VectorSet",
    "bin_geometry",
    "cosine_of_pairs",
    "nearest_neighbours",
    "neighbour_geometry",
    "norm_frequency",
    "parameter_report",
    "rank_bins",
    "read_benchmark",
    "vector_sets",
    "word_similarity",
]
