"""documents/xliff.py: XLIFF 1.1 as translate-toolkit writes it, 1.2 and 2.0 written here, translated
by the toy RNN: targets that exist are kept unless asked, every target attnmt writes is marked for
review (and loses its unit's approval), inline codes and placeholders are kept, and a file that
declares entities is refused whatever its encoding, never written back."""

from __future__ import annotations

import pytest
from lxml import etree

from attnmt.documents import DocumentError, read_document, translate_file


def model(translator, text: str) -> str:
    return translator.translate([text], split_sentences=True)[0].text


def toolkit_xliff() -> bytes:
    """An XLIFF 1.1 file made by translate-toolkit: one unit translated and approved, two not."""
    pytest.importorskip("translate.storage.xliff", reason="translate-toolkit: pip install -e '.[dev]'")
    from translate.storage import xliff

    store = xliff.xlifffile(sourcelanguage="de")
    done = store.addsourceunit("Hund rot")
    done.target = "the red dog, as a person put it"
    done.markapproved(True)
    store.addsourceunit("Katze blau")
    store.addsourceunit("Baum groß %s")
    return bytes(store)


def units(data: bytes) -> dict[str, etree._Element]:
    root = etree.fromstring(data)
    ns = root.nsmap[None]
    return {"".join(u.find(f"{{{ns}}}source").itertext()): u for u in root.iter(f"{{{ns}}}trans-unit")}


def target_of(unit) -> str | None:
    target = unit.find(f"{{{etree.QName(unit).namespace}}}target")
    return None if target is None else "".join(target.itertext())


def test_xliff_1_1_from_translate_toolkit(translator):
    """Issue 65 D: every XLIFF 1.1 file was refused ("not an XLIFF 1.2 or 2.0 file"); C: approved
    stayed on units holding machine output, and targets lost their state."""
    source = toolkit_xliff()
    assert b"urn:oasis:names:tc:xliff:document:1.1" in source
    data, suffix = translate_file(translator, source, suffix=".xlf")
    out = units(data)
    kept = out["Hund rot"]
    assert target_of(kept) == "the red dog, as a person put it" and kept.get("approved") == "yes"
    for text, read in (("Katze blau", "Katze blau"), ("Baum groß %s", "Baum groß")):
        unit = out[text]
        assert target_of(unit) == model(translator, read) + (" %s" if "%s" in text else "")
        target = unit.find(f"{{{etree.QName(unit).namespace}}}target")
        assert (target.get("state"), target.get("state-qualifier")) == ("needs-review-translation", "mt-suggestion")
        assert unit.get("approved") is None
    again = units(translate_file(translator, source, suffix=".xlf", retranslate=True)[0])["Hund rot"]
    assert target_of(again) == model(translator, "Hund rot") and again.get("approved") is None
    from translate.storage import xliff

    reread = {u.source: u for u in xliff.xlifffile(data).units}
    assert reread["Hund rot"].isapproved() and not reread["Katze blau"].isapproved()


XLIFF12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="app" source-language="de" target-language="en" datatype="plaintext"><body>
    <trans-unit id="1" approved="yes"><source>Hund rot</source><target state="final">a dog</target></trans-unit>
    <trans-unit id="2"><source>Katze <g id="b">blau</g> Baum</source><target state="new"/></trans-unit>
    <group translate="no"><trans-unit id="3"><source>Auto</source></trans-unit></group>
  </body></file>
</xliff>"""

XLIFF20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="de" trgLang="en">
  <file id="f"><unit id="u1"><segment state="final"><source>Hund rot</source><target>a dog</target></segment>
  <segment><source>Katze <pc id="1">blau</pc> Baum</source></segment></unit></file>
</xliff>"""


def test_xliff_1_2_and_2_0_marks(translator):
    out = units(translate_file(translator, XLIFF12.encode(), suffix=".xliff")[0])
    assert target_of(out["Hund rot"]) == "a dog" and out["Hund rot"].get("approved") == "yes"
    second = out["Katze blau Baum"]
    assert " ".join(target_of(second).split()) == " ".join(model(translator, "Katze blau Baum").split())
    assert second.find("{*}target/{*}g").text  # the inline code holds a word (placed, or the nearest one)
    assert second.find("{*}target").get("state") == "needs-review-translation"
    assert target_of(out["Auto"]) is None  # inside a group with translate="no"
    root = etree.fromstring(translate_file(translator, XLIFF20.encode(), suffix=".xliff")[0])
    first, second = root.iter("{*}segment")
    assert (first.get("state"), first.find("{*}target").text) == ("final", "a dog")
    assert (second.get("state"), second.get("subState")) == ("initial", "attnmt:mt")
    assert second.find("{*}target/{*}pc").text


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-be", "utf-7"])
def test_entities_are_refused_whatever_the_encoding(encoding):
    """Issue 66 G: the refusal was a byte test for "<!ENTITY", which UTF-16 and UTF-7 pass: the
    translated file kept the declaration and &e;, in UTF-8, for the next tool to resolve."""
    text = (f'<?xml version="1.0" encoding="{encoding.upper()}"?><!DOCTYPE xliff [<!ENTITY e SYSTEM '
            f'"file:///etc/passwd">]><xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file>'
            f'<body><trans-unit id="1"><source>Hund &e;</source></trans-unit></body></file></xliff>')
    with pytest.raises(DocumentError, match=r"x\.xliff: declares XML entities or other DTD declarations"):
        read_document(text.encode(encoding), ".xliff", name="x.xliff")


@pytest.mark.parametrize("declaration", ['<!ATTLIST xliff a CDATA "x">', '<!ELEMENT xliff ANY>',
                                         '<!NOTATION n SYSTEM "x">', '<!ENTITY % p "x">'])
def test_any_declaration_in_a_doctype_is_refused(declaration):
    text = (f'<!DOCTYPE xliff [{declaration}]><xliff version="1.2" '
            f'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body/></file></xliff>')
    with pytest.raises(DocumentError, match=r"declares XML entities or other DTD declarations"):
        read_document(text.encode(), ".xliff", name="x.xliff")
    plain = read_document(text.replace(f"[{declaration}]", "").encode(), ".xliff", name="x.xliff")
    assert plain.sentences == []
