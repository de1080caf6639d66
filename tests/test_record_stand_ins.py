"""Where a run record stands in for a run directory: the reports say so in one wording (nlgkit.runs.records), and
training counts that sum two languages (old WMT-14 joint vocabularies) are refused wherever a manifest is at hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nlgkit.core.errors import DataError
from nlgkit.evaluate.scoring import score_files
from nlgkit.experiments.hirasawa_runs import find_runs
from nlgkit.runs.outputs import RECORD_FILE
from nlgkit.runs.records import reading_record, with_records


def test_every_report_logs_a_record_standing_in_for_a_run_in_one_wording(tmp_path: Path) -> None:
    records = tmp_path / "records"
    (records / "text_en-de_random_seed1").mkdir(parents=True)
    (records / "text_en-de_random_seed1" / RECORD_FILE).write_text("{}")
    run_dir = tmp_path / "runs" / "text_en-de_random_seed1"  # never trained here
    line = reading_record(run_dir, records / "text_en-de_random_seed1")
    assert line == f"{run_dir}: no trained run directory; reading its record {records / 'text_en-de_random_seed1'}"
    logged: list[str] = []
    assert with_records([str(run_dir)], str(records), logged.append) == [str(records / "text_en-de_random_seed1")]
    found, waiting = find_runs([str(run_dir)], str(records), logged.append)
    assert found == [records / "text_en-de_random_seed1"] and waiting == []
    assert logged == [line, line]


def test_train_vocab_of_a_joint_vocabulary_counting_both_languages_is_refused(tmp_path: Path) -> None:
    """Was: --train-vocab of an old WMT-14 data directory binned English words by English + German counts."""
    hyp, ref = tmp_path / "hyp.en", tmp_path / "ref.en"
    hyp.write_text("the house\n")
    ref.write_text("the house\n")
    data = tmp_path / "wmt14"
    data.mkdir()
    (data / "vocab.en.txt").write_text("<unk>\t0\n<pad>\t0\n<s>\t0\n</s>\t0\nthe\t9\nhouse\t3\n")
    (data / "manifest.json").write_text(json.dumps({"joint_vocab": True}))
    with pytest.raises(DataError, match="count both languages' training text together"):
        score_files(hyp, [ref], "bleu", train_vocab=data / "vocab.en.txt")
    (data / "manifest.json").write_text(json.dumps({"joint_vocab": True, "vocab_counts": "per language"}))
    assert score_files(hyp, [ref], "bleu", train_vocab=data / "vocab.en.txt")["vu"]["score"] == 2
