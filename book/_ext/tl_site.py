"""Sphinx extension for the book's site: every page loads only from the host that
serves it.

Registered in _config.yml (``sphinx.local_extensions``). On every HTML page it

* drops scripts that Jupyter Book's stack adds twice (sphinx-thebe's
  ``const THEBE_JS_URL = ...`` declared twice is a SyntaxError in the console of every
  page);
* drops sphinx-thebe's loader when thebe is off in ``launch_buttons`` (it names a CDN
  and would only fetch from it if a reader could start thebe, which the book does not
  offer);
* drops the saved ipywidgets state that myst-nb embeds: with no widget manager on the
  site (``nb_ipywidgets_js: {}``) it is dead weight; the kernel-free twins carry their
  own data;
* warns (so ``-W`` fails the build) if any script or stylesheet of a page comes from
  another host.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _attrs(asset: Any) -> dict:
    return dict(getattr(asset, "attributes", {}) or {})


def _filename(asset: Any) -> str:
    return str(getattr(asset, "filename", asset) or "")


def _is_remote(url: str) -> bool:
    return url.startswith(("http://", "https://", "//"))


def tidy_page_assets(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree
) -> None:
    thebe_on = bool(
        (app.config.html_theme_options or {}).get("launch_buttons", {}).get("thebe")
    )
    scripts, seen = [], set()
    for js in context.get("script_files", []):
        attrs = _attrs(js)
        key = (_filename(js), tuple(sorted((k, str(v)) for k, v in attrs.items())))
        if key in seen:
            continue
        seen.add(key)
        body = str(attrs.get("body", ""))
        if not thebe_on and (
            "THEBE_JS_URL" in body or _filename(js).endswith("sphinx-thebe.js")
        ):
            continue
        if attrs.get("type") == WIDGET_STATE:
            continue
        scripts.append(js)
    context["script_files"] = scripts
    for asset in list(scripts) + list(context.get("css_files", [])):
        if _is_remote(_filename(asset)):
            logger.warning(
                "page %s loads %s from another host; the site must be self-contained",
                pagename,
                _filename(asset),
            )


def setup(app: Sphinx) -> dict:
    app.connect(
        "html-page-context", tidy_page_assets, priority=900
    )  # after myst-nb and the themes
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
