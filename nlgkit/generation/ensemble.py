"""Ensembles: several trained runs searched as one model (``translate`` / ``caption`` with several ``--model``).

The beam search is not told about ensembles. :class:`Ensemble` is a :class:`~nlgkit.models.base.Generator`
like any other: ``encode`` runs every member's encoder and keeps each member's state under its own prefix,
``step`` steps every member and returns their features side by side (B, d₁ + … + dₙ), ``reorder`` reorders
each member's state, and its head, :class:`EnsembleHead`, splits those features again, asks each member's own
head for its normalised log-probabilities and combines them:

- ``log_linear`` (default): their mean, mean_i log p_i(w) — a hypothesis's score is the mean of the members'
  log-probabilities of it (Marian's and OpenNMT-py's ensembling); not renormalised;
- ``linear``: the log of the mean probability, log (1/n) Σ_i p_i(w) — a normalised distribution (fairseq's and
  Sockeye's default).

Only probability heads take part: a score head (``continuous``: vMF log-likelihoods, not probabilities over the
vocabulary) would mix incomparable scales, so it is refused. Members must read the same inputs the same way
(equal ``[task]`` sections, languages, vocabularies, tokenizer/subword files and the manifest's tokenizer, casing
and subword scheme) and predict the same vocabulary.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from nlgkit.core import alignment
from nlgkit.core.config import to_dict
from nlgkit.core.errors import CheckpointError, ConfigError
from nlgkit.core.io import read_json, sha256_file
from nlgkit.heads.base import HeadContext, OutputHead
from nlgkit.models.base import Generator, Inputs, State
from nlgkit.runs.loading import TrainedRun, load_trained

if TYPE_CHECKING:
    from nlgkit.data.batching import Batch

MODES = ("log_linear", "linear")
# the keys of data/manifest.json that say how text is tokenised, cased and segmented
READING_KEYS = ("tokenizer", "lowercase", "subword")


class EnsembleHead(OutputHead):
    """Combines the members' heads: features (…, Σ dᵢ) → the combined log-probabilities (…, V)."""

    def __init__(self, heads: Sequence[OutputHead], feature_dims: Sequence[int], mode: str,
                 target_embedding: nn.Embedding) -> None:
        super().__init__(HeadContext(sum(feature_dims), heads[0].vocab_size, heads[0].pad_index, target_embedding))
        # a tuple, not a ModuleList: the heads are registered (and moved, put in eval mode) by their own models
        self.heads = tuple(heads)
        self.feature_dims = list(feature_dims)
        self.mode = mode
        # log_linear's mean of log-probabilities does not sum to 1 over the vocabulary: no perplexity of it
        self.normalized = mode == "linear"

    def log_probs(self, features: Tensor) -> Tensor:
        parts = features.split(self.feature_dims, dim=-1)  # n × (…, dᵢ)
        stacked = torch.stack([head.log_probs(part).float() for head, part in zip(self.heads, parts)])  # (n, …, V)
        if self.mode == "linear":
            return torch.logsumexp(stacked, dim=0) - math.log(len(self.heads))
        return stacked.mean(dim=0)

    def loss(self, features: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
        raise NotImplementedError("an ensemble is searched, not trained: train its members")


class Ensemble(Generator):
    """Several generators searched as one; their states live side by side under the prefixes ``0.``, ``1.``, …"""

    def __init__(self, members: Sequence[Generator], mode: str = "log_linear", names: Sequence[str] = ()) -> None:
        super().__init__()
        names = list(names) or [f"model {i + 1}" for i in range(len(members))]
        if not members:
            raise ConfigError("an ensemble needs at least one model")
        check_mode(mode)
        for name, member in zip(names, members):
            if not member.head.normalized:
                raise ConfigError(f"{name}: its {type(member.head).__name__} gives scores, not probabilities; an "
                                  f"ensemble averages normalised log-probabilities, so it takes softmax heads only")
        sizes = {member.head.vocab_size for member in members}
        if len(sizes) > 1:
            raise ConfigError(f"{', '.join(names)}: output vocabularies of different sizes ({sorted(sizes)})")
        self.members = nn.ModuleList(members)  # registered: moved, saved and put in eval mode with the ensemble
        self._members: list[Generator] = list(members)  # the same modules, typed
        self.feature_dim = sum(member.feature_dim for member in members)
        self.head = EnsembleHead([m.head for m in members], [m.feature_dim for m in members], mode,
                                 members[0].target_embedding())
        self.static_state = frozenset(f"{i}.{key}" for i, m in enumerate(members) for key in m.static_state)

    def target_embedding(self) -> nn.Embedding:
        return self._members[0].target_embedding()

    def attach_head(self, head: OutputHead) -> None:
        raise NotImplementedError("an ensemble's head combines its members' heads; it takes no other")

    def _split(self, state: State) -> list[State]:
        """Each member's part of the state, without its prefix (entries a caller left out stay out); the
        search's alignment request goes to every member."""
        parts: list[State] = [{} for _ in self._members]
        for key, value in state.items():
            if key == alignment.ALIGNMENT:
                for part in parts:
                    part[key] = value
                continue
            index, name = key.split(".", 1)
            parts[int(index)][name] = value
        return parts

    @staticmethod
    def _join(parts: Sequence[State]) -> State:
        return {f"{i}.{key}": value for i, part in enumerate(parts) for key, value in part.items()}

    def encode(self, inputs: Inputs) -> State:
        return self._join([member.encode(inputs) for member in self._members])

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """Every member's step; asked for an alignment, the members' mean attention (empty when one has none)."""
        features, parts, weights = [], [], []
        for member, part in zip(self._members, self._split(state)):
            feature, part = member.step(prev_tokens, part)  # (B, dᵢ)
            features.append(feature)
            if alignment.requested(part):
                weights.append(part.pop(alignment.ALIGNMENT))
            parts.append(part)
        new_state = self._join(parts)
        if weights:
            aligned = all(w.size(1) > 0 for w in weights)
            alignment.report(new_state, state, torch.stack(weights).mean(dim=0) if aligned else weights[0][:, :0])
        return torch.cat(features, dim=-1), new_state  # (B, Σ dᵢ)

    def reorder(self, state: State, index: Tensor) -> State:
        own = {key: value for key, value in state.items() if key != alignment.ALIGNMENT}
        moved = self._join([member.reorder(part, index) if part else part
                            for member, part in zip(self._members, self._split(own))])
        if alignment.requested(state):
            moved[alignment.ALIGNMENT] = state[alignment.ALIGNMENT].index_select(0, index)
        return moved

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        raise NotImplementedError("an ensemble is searched, not trained: train its members")


def load_ensemble(run_dirs: Sequence[Path], checkpoint: str = "best", device: str = "auto",
                  mode: str = "log_linear", compute_type: str = "default") -> TrainedRun:
    """The runs of ``run_dirs`` as one :class:`TrainedRun` whose model is their :class:`Ensemble` (the first
    run's tokenizer, vocabularies and search defaults); one run is returned as it is. ``compute_type``: what the
    search computes in (:meth:`TrainedRun.computing_in`)."""
    check_mode(mode)
    runs = [load_trained(run_dir, checkpoint, device) for run_dir in run_dirs]
    if not runs:
        raise ConfigError("no model given (--model RUN_DIR, repeatable)")
    if len(runs) == 1:
        return runs[0].computing_in(compute_type)
    for run in runs[1:]:
        check_compatible(runs[0], run)
    ensemble = Ensemble([run.model for run in runs], mode, [str(run.checkpoint) for run in runs])
    return dataclasses.replace(runs[0], model=ensemble.to(runs[0].device).eval()).computing_in(compute_type)


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ConfigError(f"--ensemble-mode {mode!r}: expected one of {', '.join(MODES)}")


def check_compatible(first: TrainedRun, other: TrainedRun) -> None:
    """``other`` reads its inputs as ``first`` does and predicts the same words: equal ``[task]`` sections,
    languages (``data.src_lang``, ``data.tgt_lang``), vocabularies, tokenizer and subword files, and the tokenizer,
    casing and subword scheme the data's manifest names. Each difference is one line naming both runs."""
    where = f"{first.checkpoint} and {other.checkpoint}"
    first_task, other_task = to_dict(first.config)["task"], to_dict(other.config)["task"]
    if first_task != other_task:
        keys = sorted(k for k in first_task.keys() | other_task.keys() if first_task.get(k) != other_task.get(k))
        raise CheckpointError(f"{where}: cannot be ensembled, their [task] sections differ ({', '.join(keys)})")
    # a DE→EN and an EN→DE run on one data directory have the same vocabularies and files, swapped
    first_langs, other_langs = _languages(first), _languages(other)
    if first_langs != other_langs:
        keys = sorted(k for k in first_langs.keys() | other_langs.keys() if first_langs.get(k) != other_langs.get(k))
        differ = ", ".join(f"data.{k} = {first_langs.get(k)!r} and {other_langs.get(k)!r}" for k in keys)
        raise CheckpointError(f"{where}: cannot be ensembled, they read or write other languages ({differ})")
    if {lang: v.checksum() for lang, v in first.vocabs.items()} != {lang: v.checksum() for lang, v in
                                                                    other.vocabs.items()}:
        raise CheckpointError(f"{where}: cannot be ensembled, their vocabularies differ")
    # the manifest records where and when the data was prepared, and how the text is read (its pipeline's keys)
    first_reading, other_reading = _reading(first), _reading(other)
    if first_reading != other_reading:
        keys = sorted(k for k in READING_KEYS if first_reading.get(k) != other_reading.get(k))
        differ = ", ".join(f"{k} {first_reading.get(k)!r} and {other_reading.get(k)!r}" for k in keys)
        raise CheckpointError(f"{where}: cannot be ensembled, their data/manifest.json differ in how text is read "
                              f"({differ})")
    names = {p.name for run in (first, other) for p in run.assets.iterdir() if p.is_file()} - {"manifest.json"}
    for name in sorted(names):
        mine, theirs = first.assets / name, other.assets / name
        if not (mine.is_file() and theirs.is_file()) or sha256_file(mine) != sha256_file(theirs):
            raise CheckpointError(f"{where}: cannot be ensembled, their data/{name} differ (another tokenizer or "
                                  f"subword model)")


def _languages(run: TrainedRun) -> dict[str, str]:
    """The run's ``data.*_lang`` keys (source and target language; a captioning run has the target's only)."""
    return {key: value for key, value in to_dict(run.config)["data"].items() if key.endswith("_lang")}


def _reading(run: TrainedRun) -> dict[str, object]:
    """What the run's ``data/manifest.json`` says about reading text (``nlgkit.data.tokenize.load_pipeline``)."""
    path = run.assets / "manifest.json"
    manifest = read_json(path) if path.is_file() else {}
    return {key: manifest.get(key) for key in READING_KEYS} if isinstance(manifest, dict) else {}
