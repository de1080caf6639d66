"""Tasks: what differs between translation and captioning, so that nothing else has to branch on it.

A task reads its prepared data into examples, batches them into named model inputs, says what a model is
built from (``ModelContext``), turns outputs into text and scores them with the metric that selects
checkpoints. The trainer, inference, run loading, benchmarks and reports only talk to this protocol.
"""

from nlgkit.core.registry import Registry
from nlgkit.tasks.base import Task, TaskData

TASKS: Registry[Task] = Registry("task")

# Plain imports, one per task: each module registers itself in TASKS.
from nlgkit.tasks import captioning as _captioning  # noqa: F401
from nlgkit.tasks import translation as _translation  # noqa: F401


def build_task(config) -> Task:  # type: ignore[no-untyped-def]
    """The task selected by ``config.task.type`` for the whole resolved recipe ``config``."""
    return TASKS.build(config.task, run_config=config)


__all__ = ["TASKS", "Task", "TaskData", "build_task"]
