"""Analyses of a trained model's word vectors and size, as pure functions on tensors and vocabularies.

One module per question the output-layer papers ask: does a vector's norm encode frequency (``norms``),
do cosines match human similarity (``wordsim``), who are a word's neighbours (``neighbours``), how does
the neighbourhood change with frequency rank (``geometry``), and what does each component cost
(``params``). ``vectors`` extracts the input and target vector sets of a model; ``similarity`` does the
chunked cosine work; ``plots`` writes figures atomically. The CLI is in :mod:`nlgkit.cli.analyze`.
"""
