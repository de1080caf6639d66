"""Metrics, each from its reference implementation (sacreBLEU, pycocoevalcap): what training validates with
and what ``nlgkit evaluate`` reports. Nothing here imports training, analyses or reports, so ``train/``
and ``tasks/`` can use it without a cycle."""
