"""The HTML pages the playbook writes itself (the first page, the report's header, the indexes), from templates.

Templates live in ``helpers/report/templates/pages/``; every value is autoescaped, so a label, a reason
or a sentence from a record can never become markup. A fragment that is already HTML (a section rendered
by another template, an embedded chart's data URI) is passed in as ``Markup`` by the one who rendered it.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from helpers.core.paths import TEMPLATES_DIR

PAGES_DIR = TEMPLATES_DIR / "pages"

_ENV = Environment(
    loader=FileSystemLoader(PAGES_DIR),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
)


def render(template: str, **context: Any) -> Markup:
    """``template`` (a file name under ``templates/pages/``) rendered with ``context``, autoescaped."""
    return Markup(_ENV.get_template(template).render(**context))


def fragment(html: str) -> Markup:
    """HTML that another template (or the chart code) rendered, to be inserted as it is."""
    return Markup(html)
