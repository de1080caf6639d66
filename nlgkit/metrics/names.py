"""The metric names ``nlgkit evaluate`` and reports accept, apart from the metrics themselves.

The CLI builds its options from these names at start-up; importing the metrics (sacreBLEU, pycocoevalcap,
NumPy) waits until a command scores something.
"""

from __future__ import annotations

METRICS = ("bleu", "chrf", "ter")  # sacrebleu's corpus metrics (the ones with sufficient statistics)
ALL_METRICS = (*METRICS, "meteor", "caption", "vu")
