"""Tasks: what differs between translation and captioning, so that nothing else has to branch on it.

A task reads its prepared data into examples, batches them into named model inputs, says what a model is
built from (``ModelContext``), reads a split's sources and references, names its output files, turns outputs
into text and scores them with the metric that selects checkpoints. The trainer, generation, run loading,
benchmarks and reports only talk to this protocol (``base.Task``). Each task module registers itself in
``nlgkit.core.registry.TASKS``; the built-in ones are listed as entry points in ``pyproject.toml``.
"""

from nlgkit.core.registry import TASKS
from nlgkit.tasks.base import Task, TaskData, build_task

__all__ = ["TASKS", "Task", "TaskData", "build_task"]
