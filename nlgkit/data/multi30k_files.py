"""Where Multi30K's files and photographs are: a dataset file from a local copy or the public repository, and a
Flickr30K image name found among Flickr8k's files (the same photographs under other names).

Shared by the caption corpus of Multi30K task 2 (:mod:`nlgkit.data.caption_sources`) and multimodal translation
(:mod:`nlgkit.data.multimodal`).
"""

from __future__ import annotations

from pathlib import Path

from nlgkit.core.errors import DataError
from nlgkit.data.captions import Locate
from nlgkit.data.download import download, is_url


def flickr30k_locator(images_dir: Path) -> Locate:
    """Find a Flickr30K name ``ID.jpg`` as itself or as the one Flickr8k file ``ID_SECRET.jpg`` (the same
    photograph); several ``ID_*.jpg`` are ambiguous, and the image is skipped saying so."""
    by_id: dict[str, list[str]] = {}
    for path in images_dir.glob("*_*.jpg"):
        by_id.setdefault(path.name.split("_", 1)[0], []).append(path.name)

    def locate(name: str) -> tuple[str, str]:
        if (images_dir / name).exists():
            return name, ""
        stem = name.rsplit(".", 1)[0]
        found = sorted(by_id.get(stem, []))
        if len(found) > 1:
            return name, f"file not found, and {len(found)} files match {stem}_*.jpg ({', '.join(found[:3])})"
        return (found[0] if found else name), ""

    return locate


def multi30k_file(source: str, relative: str, download_dir: Path) -> tuple[Path, str]:
    """Local path of a Multi30K dataset file, and its URL when ``source`` is one (then it is downloaded).

    A URL is the repository's ``data/`` base or task 1's ``data/task1/raw/`` (``download.DEFAULT_URL``);
    a directory is the dataset root, its ``data`` folder, or its ``task1/raw`` folder.
    """
    if is_url(source):
        base = source if source.endswith("/") else source + "/"
        base = base.removesuffix("task1/raw/")
        return download(base + relative, download_dir / relative), base + relative
    root = Path(source).expanduser()
    for candidate in (root, root / "data", root.parent.parent):
        if (candidate / relative).is_file():
            return candidate / relative, ""
    raise DataError(f"{root / relative}: file not found in Multi30K source {root}")
