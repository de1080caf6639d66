"""Exporting trained runs to other inference engines (CTranslate2: :mod:`nlgkit.export.ct2`).

A layer between ``runs`` (which loads a trained run) and ``generation`` (which translates with an exported model
as well as with the run itself): export reads runs, and nothing below it knows that it exists.
"""
