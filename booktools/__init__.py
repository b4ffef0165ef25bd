"""The machinery that builds the book and its editions: not part of the learner's
library (``transformer_lib`` never imports it).

One concern per module, lowest layer first (the import-linter contract in
``pyproject.toml``):

* ``paths``: where things are, and ``_config.yml``, read once;
* ``catalogs``: reading and writing the gettext catalogs, the editions' languages,
  and the seeding of the Traditional (Taiwan) catalogs from the Simplified ones;
* ``figures``: the words of the figures in each edition (the interactive figures'
  HTML, and the pictures drawn in each language while the notebooks execute);
  ``solutions``: a chapter's exercises and their solutions; ``po_check``: the
  catalogs' completeness and markup;
* ``sphinx_ext``: the Sphinx extension (``book/_ext/tl_i18n.py`` registers it);
  ``notebooks``: the Chinese notebooks behind the download buttons;
* ``execute``: the pytest plugin that makes nbval's run of every chapter the book's
  execution (``python -m pytest --nbval-lax book/``); ``editions``: builds the English
  site and the Chinese editions from that execution, and refreshes the catalogs
  (``python -m booktools.editions build|catalogs``).
"""
