"""Plug-ins that exist only for the tests: proof that a task arrives without editing nlgkit/."""
