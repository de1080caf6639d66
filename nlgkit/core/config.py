"""Recipes: TOML → validated, frozen dataclasses.

Config flows one way: a recipe file (plus ``--set section.key=value`` overrides, each parsed as a TOML
value: :mod:`nlgkit.core.recipes` reads them) is checked against the dataclasses below and the config classes
that plug-ins register in :mod:`nlgkit.core.registry` (a ``type`` key selects one; ``[data]`` is the class the
task names). Nothing here names a task, model or head. Unknown keys, wrong types and inconsistent values are
rejected with the dotted key and the file. Builders (:mod:`nlgkit.runs.build`) then turn the dataclasses into objects.
Missing keys take their defaults, so old run directories and checkpoints keep loading.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import HEADS, MODELS, TASKS, PluginConfig, Registry

# The widest seed every seeded library here accepts (numpy's and gensim's are 32-bit): a larger one or a negative
# one is refused as the recipe or flag is read, not by a traceback from inside the library.
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class PrepareConfig:
    """How ``train`` creates ``data.dir`` when it does not exist: what every task's ``[data.prepare]`` has.

    Each task extends it with its own corpora and options (``nlgkit.tasks.*``); ``corpus = "none"`` never
    prepares (the directory must come from ``nlgkit prepare``).
    """

    corpus: str = "none"
    source: str = ""  # where the corpus comes from: a URL or directory ("" = the task's default)
    min_freq: int = 2
    max_len: int = 0  # drop training pairs longer than this many tokens (0 = keep all)


@dataclass(frozen=True)
class DataConfig:
    """``[data]``: what every task's data section has; a task's config names its subclass (``data_config``)."""

    dir: str = "data/default"
    tgt_lang: str = "en"  # the language of the generated text
    train_limit: int = 0  # use only the first N training items (0 = all): for demos and tests
    valid_limit: int = 0  # use only the first N validation items (0 = all)
    prepare: PrepareConfig = field(default_factory=PrepareConfig)


# What a task's config names as its ``data_config`` (an alias: inside a plug-in config ``type`` is a field).
DataSection = type[DataConfig]


@dataclass(frozen=True)
class TrainConfig:
    """Defaults are Shalev et al.'s appendix values for Multi30K."""

    seed: int = 1
    lr: float = 0.001
    batch_size: int = 128
    batch_unit: Literal["sentences", "tokens"] = "sentences"
    accumulate: int = 1  # batches whose gradients add up to one update (fairseq's --update-freq, OpenNMT's accum_count)
    max_epochs: int = 200
    lr_decay: float = 0.8  # learning rate × lr_decay ...
    lr_patience: int = 8  # ... after this many epochs without validation-BLEU improvement
    schedule_metric: Literal["score", "loss"] = "score"  # what plateau watches: the task's metric or valid loss
    early_stop_patience: int = 20  # stop after this many epochs without improvement
    # a gain of the task's metric counts for both patiences (early stopping; plateau on the score) only when above
    # this, in the metric's units (Lightning's / Keras's min_delta; 0 = any gain, Shalev et al.'s rule)
    min_delta: float = 0.0
    min_lr: float = 0.0  # the plateau schedule never decays below this
    stop_min_lr: float = 0.0  # stop once a decay has brought the rate below this (fairseq's --stop-min-lr; 0 = never)
    clip_norm: float = 1.0  # 0 disables gradient-norm clipping
    label_smoothing: float = 0.0
    weight_decay: float = 0.0
    max_updates: int = 0  # stop after this many updates (0 = no limit)
    max_minutes: float = 0.0  # stop (after a checkpoint) once this much wall time has passed (0 = no limit)
    save_every_updates: int = 0  # also checkpoint "last" every N updates mid-epoch, for SIGKILL (0 = epoch ends only)
    # validate every N updates instead of at epoch ends (OpenNMT's valid_steps, JoeyNMT's validation_freq): the
    # patience of the schedule and of early stopping then counts validations (0 = at each epoch's end)
    validate_every_updates: int = 0
    valid_beam: int = 1  # beam size for the per-epoch validation BLEU (1 = greedy, fast)
    keep_epochs: int = 3  # checkpoints/epoch_NNN of the last K and the K best epochs (`nlgkit average`)
    # validate, keep as best and decode an exponential moving average of the weights with this decay (fairseq's
    # --ema-decay, OpenNMT's average_decay; e.g. 0.999; 0 = off): nlgkit.train.ema
    ema_decay: float = 0.0
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    amp: bool = True  # 16-bit autocast on CUDA (amp_dtype); ignored on CPU
    cpu_amp: bool = False  # bf16 autocast on the CPU: 1.1-1.8x on one AMX thread (BENCHMARKS.md; train/precision.py)
    # the 16-bit type of amp / cpu_amp: "auto" = bf16 on the CPU and on GPUs that compute it natively, else (GPUs
    # before Ampere: V100, T4) float16 with dynamic loss scaling (fairseq's --fp16); "bfloat16" or "float16" to choose
    amp_dtype: Literal["auto", "bfloat16", "float16"] = "auto"
    compile: bool = False  # torch.compile the training step, or a recurrent decoder's step modules; dynamic shapes
    num_threads: int = 0  # CPU threads (0 = all cores)
    log_every: int = 50  # updates between metric lines
    tensorboard: str = ""  # also write metrics.jsonl's scalars as TensorBoard events here ("" = off)
    optimizer: Literal["adam", "adamw"] = "adam"
    adam_betas: tuple[float, float] = (0.9, 0.999)  # (0.9, 0.98) for Transformers
    schedule: Literal["plateau", "inverse_sqrt", "none"] = "plateau"  # see nlgkit.train.schedules
    warmup_updates: int = 4000  # inverse_sqrt only
    # initial weights of a new run (nlgkit.runs.weight_init): each layer's own, or nmtpytorch's N(0, 2/fan_in)
    weight_init: Literal["default", "kaiming_normal"] = "default"
    # a new run starts from a trained run's weights (its best checkpoint) or a checkpoint directory's, with a fresh
    # optimizer, schedule and loop: fine-tuning (nlgkit.train.init_from); a resumed run takes its own checkpoint
    init_from: str = ""


@dataclass(frozen=True)
class SearchConfig:
    """Defaults for ``nlgkit translate`` with this run's model."""

    beam: int = 5
    nbest: int = 1
    length_penalty: float = 1.0  # scores divided by length**length_penalty (0 = raw log-probability)
    max_len_a: float = 1.5  # hypotheses stop at a * source_length + b tokens
    max_len_b: int = 10
    min_len: int = 0  # no EOS before this many tokens
    no_repeat_ngram_size: int = 0  # no n-gram of this size twice in one output (fairseq's option; 0 = off)
    no_unk: bool = False  # never output <unk> (CTranslate2's disable_unk)
    batch_size: int = 64


@dataclass(frozen=True)
class EmbeddingsConfig:
    """``[embeddings]``: input embeddings initialised from word-vector tables (Hirasawa & Komachi 2019).

    Vocabulary words missing from a table start from the mean of the table's out-of-vocabulary vectors and
    are trained individually (see :mod:`nlgkit.wordvectors.initial`); only a freshly trained model reads the
    tables, so a trained run translates without them.
    """

    source: str = ""  # table (nlgkit .safetensors, word2vec/GloVe/.vec text, fastText .bin) for the source embedding
    target: str = ""  # … for the decoder's target input embedding (tied and joint heads share it)
    trainable: bool = True  # false: rows found in the table stay fixed; missing words are still trained
    project: bool = False  # a table of another size is projected to the embedding size (else an error)
    normalize: bool = False  # every row scaled to unit length (Hirasawa's nmtpytorch loader), padding stays zero
    # the table's rows (after normalize) scaled by one factor to the mean length of the model's own initial rows, so
    # that words from a table and words drawn at random start at one scale (angles and relative lengths unchanged)
    match_scale: bool = False
    label: str = ""  # how reports name these embeddings (e.g. "glove+abtt"); "" = "random" without tables

    @property
    def name(self) -> str:
        """The label reports use: the recipe's, else "random" or the tables' file stem."""
        if self.label:
            return self.label
        table = self.source or self.target
        return Path(table).stem if table else "random"


@dataclass(frozen=True)
class RunSection:
    dir: str = "runs/default"
    name: str = ""


# Fields whose dataclass is chosen by a ``type`` key, and the leaf registry that holds the choices.
PLUGIN_REGISTRIES: dict[str, Registry[Any]] = {"task": TASKS, "model": MODELS, "head": HEADS}


@dataclass(frozen=True)
class RunConfig:
    """The whole resolved recipe: what a run directory and every checkpoint record."""

    run: RunSection = field(default_factory=RunSection)
    # plug-in sections: a recipe without one gets its registry's default (recipes written before the section)
    task: PluginConfig = field(default_factory=PluginConfig)
    data: DataConfig = field(default_factory=DataConfig)  # the task's subclass of DataConfig
    model: PluginConfig = field(default_factory=PluginConfig)
    head: PluginConfig = field(default_factory=PluginConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    embeddings: EmbeddingsConfig = field(default_factory=EmbeddingsConfig)


# ---------------------------------------------------------------------------------------------------------
# Generic dict → dataclass conversion with dotted-path errors


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, where: str, source: str, saved: bool = False) -> Any:
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{source}: {where} = {value!r}: expected one of {', '.join(map(repr, choices))}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(args) < len(typing.get_args(tp)):
            return None
        return _convert(value, args[0], where, source, saved)
    if origin in (tuple, list):
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{source}: {where} = {value!r}: expected a list")
        return tuple(_convert(v, item_tp, f"{where}[{i}]", source, saved) for i, v in enumerate(value))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {where}: expected a table, got {value!r}")
        return from_dict(tp, value, where, source, saved)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {where} = {value!r}: expected true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: {where} = {value!r}: expected an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: {where} = {value!r}: expected a number")
        if not math.isfinite(value):  # TOML accepts nan and inf; no setting of nlgkit means them
            raise ConfigError(f"{source}: {where} = {value!r}: expected a finite number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {where} = {value!r}: expected a string")
        return value
    raise TypeError(f"unsupported config type {tp!r} at {where}")


def from_dict(cls: type, data: dict[str, Any], prefix: str = "", source: str = "recipe",
              saved: bool = False) -> Any:
    """Build dataclass ``cls`` from ``data``, rejecting unknown keys and wrong types by dotted path.

    ``saved``: ``data`` is a config that nlgkit wrote itself (run directory, checkpoint, record). Its ``[data]``
    may hold options of an older, task-blind schema (a captioning run's ``src_lang``); the task's data
    section reads the keys it knows and drops the rest. Recipes get no such leniency.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    dot = f"{prefix}." if prefix else ""
    if saved and isinstance(cls, type) and issubclass(cls, (DataConfig, PrepareConfig)):
        data = {key: value for key, value in data.items() if key in fields}
    _check_keys(data, list(fields), dot, source)
    if cls is RunConfig:
        return _run_config(data, source, saved)
    kwargs: dict[str, Any] = {}
    for name in fields:
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], f"{dot}{name}", source, saved)
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: [{prefix or 'recipe'}]: {exc}") from None


def _check_keys(data: dict[str, Any], known: list[str], dot: str, source: str) -> None:
    """An unknown key is an error naming it and the closest known key."""
    for key in data:
        if key not in known:
            hint = difflib.get_close_matches(key, known, n=1)
            extra = f" (did you mean '{dot}{hint[0]}'?)" if hint else ""
            raise ConfigError(f"{source}: unknown key '{dot}{key}'{extra}")


def _run_config(data: dict[str, Any], source: str, saved: bool) -> RunConfig:
    """The whole recipe: plug-in sections through their registries, ``[data]`` through the task's class."""
    hints = typing.get_type_hints(RunConfig)
    kwargs: dict[str, Any] = {}
    for name, registry in PLUGIN_REGISTRIES.items():
        section = data[name] if name in data else {"type": registry.default()}  # default(): loads every plug-in
        kwargs[name] = _plugin_from_dict(registry, section, name, source, saved)
    data_class = getattr(kwargs["task"], "data_config", DataConfig)
    kwargs["data"] = from_dict(data_class, _table(data.get("data", {}), "data", source), "data", source, saved)
    for name in ("run", "train", "search", "embeddings"):
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], name, source, saved)
    return RunConfig(**kwargs)


def _table(value: Any, where: str, source: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {where}: expected a table, got {value!r}")
    return value


def _plugin_from_dict(registry: Registry[Any], data: Any, where: str, source: str, saved: bool) -> PluginConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {where}: expected a table")
    if "type" not in data:
        raise ConfigError(f"{source}: {where}.type is required (one of: {', '.join(registry.names())})")
    if not isinstance(data["type"], str):
        raise ConfigError(f"{source}: {where}.type = {data['type']!r}: expected a name in quotes (one of: "
                          f"{', '.join(registry.names())})")
    config_class = registry.config_class(data["type"], f"{source}: {where}.type")
    known = {f.name for f in dataclasses.fields(config_class)}
    for key in (key for key in data if key not in known):  # another head's or model's key is no typo: say so
        owners = [name for name in registry.names()
                  if key in {f.name for f in dataclasses.fields(registry.config_class(name))}]
        if owners:
            shown = ", ".join(owners[:4]) + (", …" if len(owners) > 4 else "")
            raise ConfigError(f"{source}: unknown key '{where}.{key}': the {data['type']!r} {where} has no such "
                              f"option ({where}s that have it: {shown})")
    config: PluginConfig = from_dict(config_class, data, where, source, saved)
    return config


def to_dict(config: Any) -> dict[str, Any]:
    """The config as plain TOML/JSON-compatible data (tuples become lists)."""

    def plain(value: Any) -> Any:
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(config))


def config_from_dict(data: dict[str, Any], source: str = "config") -> RunConfig:
    """Rebuild a saved config (run directory or checkpoint); missing keys take today's defaults."""
    config = from_dict(RunConfig, data, "", source, saved=True)
    validate(config, source)
    return config


def validate(config: RunConfig, source: str) -> None:
    """Cross-field rules, checked in one place."""
    t = config.train
    s = config.search
    positive = {"train.lr": t.lr, "train.batch_size": t.batch_size, "train.accumulate": t.accumulate,
                "train.max_epochs": t.max_epochs, "train.log_every": t.log_every,
                "train.valid_beam": t.valid_beam, "search.beam": s.beam, "search.nbest": s.nbest,
                "search.batch_size": s.batch_size}
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{source}: {key} = {value}: must be positive")
    for name, directory in (("run.dir", config.run.dir), ("data.dir", config.data.dir)):
        if not directory.strip():  # pathlib would read "" as the current folder, and a run would write all over it
            raise ConfigError(f"{source}: {name} = {directory!r}: empty path")
    if not 0 <= t.seed <= MAX_SEED:
        raise ConfigError(f"{source}: train.seed = {t.seed}: must be in [0, {MAX_SEED}]")
    if not 0.0 <= t.label_smoothing < 1.0:
        raise ConfigError(f"{source}: train.label_smoothing = {t.label_smoothing}: must be in [0, 1)")
    if t.warmup_updates <= 0:
        raise ConfigError(f"{source}: train.warmup_updates = {t.warmup_updates}: must be positive")
    if len(t.adam_betas) != 2 or not all(0.0 <= b < 1.0 for b in t.adam_betas):
        raise ConfigError(f"{source}: train.adam_betas = {list(t.adam_betas)}: two values in [0, 1)")
    if t.min_delta < 0:
        raise ConfigError(f"{source}: train.min_delta = {t.min_delta}: must be 0 or positive")
    if t.stop_min_lr < 0 or t.min_lr < 0:
        raise ConfigError(f"{source}: train.min_lr = {t.min_lr}, train.stop_min_lr = {t.stop_min_lr}: "
                          "must not be negative")
    if 0 < t.stop_min_lr <= t.min_lr:
        raise ConfigError(f"{source}: train.stop_min_lr = {t.stop_min_lr} can never be passed: the schedule stops "
                          f"decaying at train.min_lr = {t.min_lr}")
    for key, value in (("train.keep_epochs", t.keep_epochs), ("train.save_every_updates", t.save_every_updates),
                       ("train.validate_every_updates", t.validate_every_updates),
                       ("search.min_len", s.min_len), ("search.no_repeat_ngram_size", s.no_repeat_ngram_size),
                       ("search.max_len_a", s.max_len_a), ("train.max_updates", t.max_updates),
                       ("train.max_minutes", t.max_minutes), ("train.clip_norm", t.clip_norm),
                       ("train.weight_decay", t.weight_decay), ("train.num_threads", t.num_threads),
                       ("data.train_limit", config.data.train_limit), ("data.valid_limit", config.data.valid_limit)):
        if value < 0:
            raise ConfigError(f"{source}: {key} = {value}: must be 0 or positive")
    if not 0.0 <= t.ema_decay < 1.0:
        raise ConfigError(f"{source}: train.ema_decay = {t.ema_decay}: must be in [0, 1) (0 = no averaging)")
    if not 0.0 < t.lr_decay <= 1.0:
        raise ConfigError(f"{source}: train.lr_decay = {t.lr_decay}: must be in (0, 1]")
    if s.nbest > s.beam:
        raise ConfigError(f"{source}: search.nbest = {s.nbest} exceeds search.beam = {s.beam}")
    if t.init_from and (config.embeddings.source or config.embeddings.target):
        raise ConfigError(f"{source}: train.init_from and embeddings tables are both set: the weights of "
                          f"{t.init_from} would replace the tables' rows (set one of them)")
    for name in ("task", "model", "head"):
        check = getattr(getattr(config, name), "validate", None)
        if check is not None:
            check(source, config)
