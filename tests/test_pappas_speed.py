"""Pappas et al.'s Table 4 (training speed by output layer and sampling share): the measurement times real
updates of the recipe's model, and the report sets each cell beside the paper's as a ratio to the learned head."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from helpers import reproduce

from nlgkit.data.vocab import SPECIALS
from nlgkit.experiments.bench.research import (
    measure_model_training,
    spawn_model_training,
    synthetic_parallel_data,
)
from nlgkit.experiments.pappas_speed import SPEED_HEADS, SPEED_SHARES, speed_report

RECIPE = str(Path(__file__).resolve().parents[1] / "recipes" / "pappas_multi30k.toml")
TINY = ["model.embedding_dim=16", "model.hidden_dim=16", "train.num_threads=1"]


def test_synthetic_batches_have_sentence_lengths_and_zipf_word_counts() -> None:
    data = synthetic_parallel_data(1000, 200, seed=3)
    assert len(data.src) == len(data.tgt) == 200
    assert all(8 <= len(s) <= 20 for s in data.src + data.tgt)
    counts = Counter(word for sentence in data.tgt for word in sentence)
    assert min(counts) >= len(SPECIALS) and max(counts) < 1000
    first = len(SPECIALS)  # rank 1 is about twice as frequent as rank 2, and far above rank 100
    assert counts[first] > 1.5 * counts[first + 1] and counts[first] > 20 * counts[first + 99]
    assert synthetic_parallel_data(1000, 200, seed=3) == data


def test_speed_measurement_times_whole_updates_of_the_recipe_model() -> None:
    result = measure_model_training(RECIPE, [*TINY, "head.type='joint'", "head.sampling.share=0.05"],
                                    vocab_size=500, sentences=4, updates=2, warmup=1)
    data = synthetic_parallel_data(500, 12, seed=1)
    assert result["target_tokens"] == sum(len(t) + 1 for t in data.tgt[4:12])  # the timed batches, EOS included
    assert result["tokens_per_s"] > 0 and result["threads"] == 1 and result["vocab"] == 500
    learned = spawn_model_training(RECIPE, [*TINY, "head.type='learned'"], 500, 4, 1, 1)  # its own process
    tied = measure_model_training(RECIPE, [*TINY, "head.type='tied'"], 500, 4, 1, 1)
    # the models differ by the 500 × 16 output matrix that the tied head shares with the target embedding
    assert learned["trainable_parameters"] - tied["trainable_parameters"] == 500 * 16


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_speed_measurement_runs_on_the_gpu_and_reports_its_memory() -> None:
    result = measure_model_training(RECIPE, [*TINY, "head.type='joint'", "head.sampling.share=0.25"],
                                    vocab_size=500, sentences=4, updates=2, warmup=1, device="cuda")
    cpu = measure_model_training(RECIPE, [*TINY, "head.type='joint'", "head.sampling.share=0.25"],
                                 vocab_size=500, sentences=4, updates=2, warmup=1)
    assert result["device"] == "cuda" and result["peak_gpu_mib"] > 0 and cpu["peak_gpu_mib"] is None
    assert result["target_tokens"] == cpu["target_tokens"] and result["tokens_per_s"] > 0


def test_speed_report_on_a_gpu_shows_gpu_memory() -> None:
    results = [{"head": kind, "joint_dim": dj, "share": share, "tokens_per_s": 1000.0, "peak_rss_mib": 900.0,
                "peak_gpu_mib": 10.0 * (i + 1)} for i, (kind, dj) in enumerate(SPEED_HEADS) for share in SPEED_SHARES]
    text = speed_report(results, "Setting.")
    memory = text.split("## Peak GPU memory (MiB, torch's max allocated)", 1)[1]
    assert "| learned | 10 | 10 | 10 | 10 |" in memory and "900" not in memory


def test_speed_report_sets_ratios_to_the_learned_head_beside_the_papers() -> None:
    results = [{"head": kind, "joint_dim": dj, "share": share, "tokens_per_s": 1000.0 * (i + 1) * (j + 1),
                "peak_rss_mib": 100.0 + i} for i, (kind, dj) in enumerate(SPEED_HEADS)
               for j, share in enumerate(SPEED_SHARES)]
    text = speed_report(results, "Setting.")
    ours = text.split("## nlgkit", 1)[1].split("## The paper", 1)[0]
    assert "| joint (d_j 2048) | 4,000 (4.00×) | 8,000 (4.00×) | 12,000 (4.00×) | 16,000 (4.00×) |" in ours
    paper = text.split("## The paper", 1)[1].split("## Speed-up", 1)[0]
    assert "| joint (d_j 4096) | 1,700 (0.40×) | 2,900 (0.51×) | 6,000 (0.85×) |" in paper
    assert "learned 2.00× (paper 1.65×)" in text  # 5 % over 50 %: 4,000 / 2,000 here; 7.1K / 4.3K there


def test_pappas_speed_rejects_a_bad_option_before_measuring(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        reproduce(["pappas-speed", "--set", "model.hiden_dim=16", "--vocab", "500"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and "hiden_dim" in err
