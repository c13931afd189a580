"""The secret-hunt helper itself (tests/secret_hunt.py): it finds a secret in each encoding, wherever it sits."""

from __future__ import annotations

import base64
import binascii
import json

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from tests.secret_hunt import encodings_of, hunt, labelled_encodings

SECRET = "sk/live+é=Zq81xPw3LmN0"
# Another key, a character apart (in the middle: the base64 of a secret inside a blob leaves out up to 4 bits at
# either end, which depend on the bytes around it).
OTHER = "sk/live+é=Zq81yPw3LmN0"


def _document(secret: str, pad: str) -> bytes:
    return json.dumps({"pad": pad, "judge": {"url": "http://j", "api_key": secret, "n": 3}}).encode()


def test_a_secret_inside_a_base64_of_a_larger_json_document_is_found_at_every_offset() -> None:
    """Whatever the number of bytes before it (so each of the three alignments), padded or not, standard or URL-safe,
    the base64 of a JSON document holding the secret is caught, and the same document holding another value is not."""
    offsets: set[str] = set()
    for pad in range(9):
        plain_doc = base64.b64encode(json.dumps({"pad": "x" * pad, "k": SECRET}, ensure_ascii=False).encode())
        offsets |= {line.split("offset ")[1][0] for line in hunt(plain_doc, [SECRET]) if "offset" in line}
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            for strip in (False, True):
                blob = encode(_document(SECRET, "x" * pad))
                blob = blob.rstrip(b"=") if strip else blob
                found = hunt(b"config: " + blob + b" (end)", {"api_key": SECRET}, "log")
                assert any(" as base64" in line for line in found), (pad, encode, strip)
                clean = encode(_document(OTHER, "x" * pad))
                assert hunt(b"config: " + clean, {"api_key": SECRET}) == [], (pad, encode)
    assert offsets >= {"1", "2"}, offsets  # offset 0's run is the unpadded encoding's prefix, found under that name


def test_each_named_encoding_is_found_and_named() -> None:
    raw = SECRET.encode()
    cases = {
        "plain": b"a " + raw + b" b",
        "base64 (padded)": base64.b64encode(raw),
        "hex": b"0x" + binascii.hexlify(raw),
        "HEX": binascii.hexlify(raw).upper(),
        "msgpack str": msgspec.msgpack.encode({"k": SECRET}),
        "msgpack bytes": msgspec.msgpack.encode({"k": raw}),
        "JSON-escaped (ensure_ascii=True)": json.dumps({"k": "before " + SECRET}).encode(),
        "repr (bytes)": repr({"k": raw}).encode(),
    }
    for name, blob in cases.items():
        found = hunt(blob, {"the key": SECRET}, "out")
        assert found, name
        assert all(line.startswith("out: the key as ") for line in found)
        if name in {"hex", "HEX", "base64 (padded)"}:
            assert f"out: the key as {name}" in found
    assert "JSON-escaped (ensure_ascii=True)" in dict(labelled_encodings(SECRET))
    assert b"\\u00e9" in b"".join(encodings_of(SECRET))


def test_a_report_names_the_secret_by_label_never_by_value() -> None:
    found = hunt(base64.b64encode(SECRET.encode()), [SECRET, OTHER])
    assert found
    assert all(SECRET not in line for line in found)
    assert all(line.startswith("blob: secret #0 as ") for line in found)


def test_bytes_that_are_not_utf8_have_the_byte_encodings() -> None:
    secret = b"\xff\xfe\x00sealed-key-material\x80"
    names = dict(labelled_encodings(secret))
    assert "msgpack bytes" in names
    assert "msgpack str" not in names
    assert hunt(base64.b64encode(b"..." + secret + b"..."), [secret])
    assert hunt(repr(secret).encode(), [secret])


@given(
    secret=st.text(min_size=12, max_size=40).filter(lambda s: s.strip() == s and "\x00" not in s),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
    urlsafe=st.booleans(),
)
def test_property_base64_of_any_document_holding_the_secret_is_caught(
    secret: str, before: str, after: str, urlsafe: bool
) -> None:
    document = json.dumps({"before": before, "secret": secret, "after": after}, ensure_ascii=False).encode()
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    assert hunt(encode(document).rstrip(b"="), [secret])
    assert hunt(encode(msgspec.msgpack.encode([before, secret.encode(), after])), [secret])
