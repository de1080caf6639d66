"""sacremoses' Moses detokenizer, loaded without the tokenizer that shares its module.

``import sacremoses`` runs ``sacremoses.tokenize``, whose ``MosesTokenizer`` class body compiles 84 regular
expressions over large Unicode classes when the module loads. Turning output tokens back into text (every
``translate``, every validation) needs only ``MosesDetokenizer``, so :func:`detokenizer_class` executes
sacremoses' own ``tokenize.py`` without the ``MosesTokenizer`` class: the same detokenizer code, a fraction
of the start-up. Its helpers (``sacremoses.corpus``, ``.util``, ``.indic``) are imported as usual, with the
package's ``__init__`` (which imports everything) held back meanwhile; a later ``import sacremoses`` works
as if nothing had happened. Once the full package is loaded (a Moses-tokenised corpus), or if this
sacremoses' layout is not the expected one, its ``MosesDetokenizer`` is used as it is.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

PACKAGE = "sacremoses"
SKIPPED_CLASS = "MosesTokenizer"
WANTED_CLASS = "MosesDetokenizer"
# held while the package is held back: no other thread may import sacremoses and get the stand-in
IMPORT_LOCK = threading.Lock()


@functools.cache
def detokenizer_class() -> type:
    """sacremoses' ``MosesDetokenizer`` class (see the module docstring for how it is loaded)."""
    loaded = sys.modules.get(f"{PACKAGE}.tokenize")
    if loaded is not None:
        detokenizer: type = getattr(loaded, WANTED_CLASS)
        return detokenizer
    try:
        with IMPORT_LOCK:
            return _without_tokenizer()
    except (ImportError, OSError, SyntaxError, KeyError, AttributeError, TypeError, ValueError):
        from sacremoses import MosesDetokenizer  # another layout than the one read below: load it all

        fallback: type = MosesDetokenizer
        return fallback


def _without_tokenizer() -> type:
    """Execute sacremoses' ``tokenize.py`` minus the ``MosesTokenizer`` class; return ``MosesDetokenizer``."""
    spec = importlib.util.find_spec(PACKAGE)  # finds the package without running its __init__
    if spec is None or spec.origin is None:
        raise ImportError(f"{PACKAGE} is not installed")
    path = Path(spec.origin).with_name("tokenize.py")
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    tree.body = [node for node in tree.body if not (isinstance(node, ast.ClassDef) and node.name == SKIPPED_CLASS)]
    namespace: dict[str, Any] = {"__name__": f"{PACKAGE}.tokenize", "__file__": str(path)}
    held_back = PACKAGE not in sys.modules
    if held_back:  # submodules import through their package: give them one whose __init__ has not run
        sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)
    try:
        exec(compile(tree, str(path), "exec"), namespace)  # noqa: S102 - sacremoses' own, installed source
    finally:
        if held_back:
            del sys.modules[PACKAGE]
    detokenizer = namespace[WANTED_CLASS]
    if not isinstance(detokenizer, type):
        raise TypeError(f"{path}: {WANTED_CLASS} is not a class")
    return detokenizer
