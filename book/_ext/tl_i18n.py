"""The Sphinx extension of the book's editions, as _config.yml registers it
(``sphinx.local_extensions``): its code is :mod:`booktools.sphinx_ext`."""

from booktools.sphinx_ext import setup

__all__ = ["setup"]
