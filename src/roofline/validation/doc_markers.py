"""The markers of a generated page: blocks ``<!-- NAME: ... -->`` … ``<!-- end NAME -->`` and
inline figures ``<!--v:KEY-->value<!--/v-->``, found, filled and compared. ``regenerate`` writes
pages through these; page tests compare through ``quoted_figures``."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import SpecError

__all__ = ["blocks_in", "replace_block", "quoted_figures", "fill_inline"]

_BLOCK = r"(<!-- {name}: [^\n]*? -->\n)(.*?)(\n<!-- end {name} -->)"
_INLINE = re.compile(r"<!--v:([\w./-]+)-->([^\n]*?)<!--/v-->")


def blocks_in(text: str) -> list[str]:
    """Names of the generated blocks (``<!-- NAME: ... -->`` … ``<!-- end NAME -->``) in a page."""
    return [n for n in re.findall(r"<!-- ([\w-]+): [^\n]*? -->\n", text)
            if f"\n<!-- end {n} -->" in text]


def replace_block(text: str, name: str, body: str, page: str = "page") -> str:
    """``text`` with the body of block ``name`` replaced by ``body`` (markers kept)."""
    m = re.search(_BLOCK.format(name=re.escape(name)), text, re.S)
    if m is None:
        raise SpecError(f"{page}: no generated block <!-- {name}: ... --> ... <!-- end {name} -->")
    return text[:m.start(2)] + body + text[m.end(2):]


def quoted_figures(text: str, values: Mapping[str, str]
                   ) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """The keys of ``values`` that ``text`` quotes as inline figures, and those among them whose
    marker holds another text (KEY -> (on the page, computed)): a page test's one check."""
    page = {m.group(1): m.group(2) for m in _INLINE.finditer(text)}
    quoted = page.keys() & values.keys()
    return quoted, {k: (page[k], values[k]) for k in quoted if page[k] != values[k]}


def fill_inline(text: str, values: Mapping[str, str], page: str = "page") -> str:
    """``text`` with every inline figure ``<!--v:KEY-->old<!--/v-->`` set to ``values[KEY]``;
    an unknown key is an error naming the allowed ones."""
    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise SpecError(f"{page}: inline figure {m.group(1)!r} is not generated; allowed: "
                            f"{', '.join(sorted(values))}")
        return f"<!--v:{m.group(1)}-->{values[m.group(1)]}<!--/v-->"

    return _INLINE.sub(sub, text)
