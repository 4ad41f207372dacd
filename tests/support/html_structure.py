"""The structure of an HTML text, for the tests that check markup is kept (tests/documents/test_markup.py,
tests/server/test_documents.py): equal counters mean the same tags, attributes and nesting."""

from __future__ import annotations

from collections import Counter

from bs4 import BeautifulSoup, Tag


def structure(html: str) -> Counter:
    """Every element as (its ancestors' and its own (name, attributes)) path: equal counters mean
    the same tags, the same attributes, nested the same way."""
    soup = BeautifulSoup(html, "html.parser", multi_valued_attributes=None)
    paths = Counter()
    for element in soup.find_all(True):
        chain = [element, *[p for p in element.parents if isinstance(p, Tag) and p is not soup]]
        paths[tuple((e.name, tuple(sorted(e.attrs.items()))) for e in reversed(chain))] += 1
    return paths
