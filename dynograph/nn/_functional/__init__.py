"""The areas of dynograph.nn.functional that live in their own files.

Each module here defines ``__all__``; dynograph/nn/functional.py re-exports all of them, so users
only ever see ``dynograph.nn.functional``.
"""
