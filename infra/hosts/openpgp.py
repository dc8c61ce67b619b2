"""The fingerprints of the primary keys in an ASCII-armored OpenPGP public key block.

A repository key fetched from its URL is only as trustworthy as that URL (a mirror, a proxy, a typo);
the roles pin each repository key by the fingerprint its publisher announces and refuse a key that
carries none of the pinned ones, before apt ever reads it. The hosts of this project have `gpgv` (apt's
own verifier) but no `gpg` to list a key's fingerprint, so the roles hand the key's text to the
`openpgp_key_problem` filter (ansible/roles/apt_repository_key), which parses it here (RFC 4880 packets,
version 4 keys).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

PUBLIC_KEY_TAG = 6  # a primary key; subkeys (tag 14) sign for it and are not what a pin names
_ARMOR = re.compile(r"-----BEGIN PGP PUBLIC KEY BLOCK-----\r?\n(.*?)-----END PGP PUBLIC KEY BLOCK-----", re.DOTALL)


class OpenPgpError(ValueError):
    """The text is not an ASCII-armored OpenPGP public key this parser understands."""


def dearmor(text: str) -> bytes:
    """The binary packets of the first armored public key block in TEXT (headers and checksum dropped)."""
    block = _ARMOR.search(text)
    if block is None:
        raise OpenPgpError("no '-----BEGIN PGP PUBLIC KEY BLOCK-----' armor in the key")
    lines = [line.strip() for line in block.group(1).splitlines()]
    if "" in lines and all(":" in line for line in lines[:lines.index("")]):  # armor headers, one empty line
        lines = lines[lines.index("") + 1:]
    data = "".join(line for line in lines if line and not line.startswith("="))  # "=" starts the checksum
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error as error:
        raise OpenPgpError(f"the armored key is not valid base64: {error}") from None


def packets(data: bytes) -> list[tuple[int, bytes]]:
    """(tag, body) of each packet, old and new header formats alike."""
    found: list[tuple[int, bytes]] = []
    at = 0
    while at < len(data):
        header = data[at]
        if not header & 0x80:
            raise OpenPgpError(f"byte {at} is not a packet header")
        if header & 0x40:  # new format: tag in 6 bits, then a 1, 2 or 5 byte length
            tag, at = header & 0x3F, at + 1
            first = _byte(data, at)
            if first < 192:
                length, at = first, at + 1
            elif first < 224:
                length, at = ((first - 192) << 8) + _byte(data, at + 1) + 192, at + 2
            elif first == 255:
                length, at = int.from_bytes(_slice(data, at + 1, 4), "big"), at + 5
            else:
                raise OpenPgpError("partial body lengths are not used in key packets")
        else:  # old format: tag in 4 bits, length type in 2
            tag, kind, at = (header >> 2) & 0x0F, header & 0x03, at + 1
            if kind == 3:
                raise OpenPgpError("indeterminate packet lengths are not used in key packets")
            size = 1 << kind
            length, at = int.from_bytes(_slice(data, at, size), "big"), at + size
        found.append((tag, _slice(data, at, length)))
        at += length
    return found


def fingerprint(body: bytes) -> str:
    """The fingerprint of one version 4 public key packet's body, 40 upper-case hex digits."""
    version = body[0] if body else 0
    if version != 4:  # v3 keys are obsolete; v6 (RFC 9580) keys sign no repository these roles use yet
        raise OpenPgpError(f"a version {version} key (only version 4 keys are read here)")
    return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body, usedforsecurity=False).hexdigest().upper()


def fingerprints(text: str) -> list[str]:
    """The fingerprints of the primary keys in an armored public key block, in the order they appear."""
    keys = [fingerprint(body) for tag, body in packets(dearmor(text)) if tag == PUBLIC_KEY_TAG]
    if not keys:
        raise OpenPgpError("the armored block holds no public key packet")
    return keys


def normalize(pin: str) -> str:
    """A fingerprint as publishers print it ("DE15 B144 ...", lower case, 0x-prefixed) in the form above."""
    return re.sub(r"\s+", "", pin).upper().removeprefix("0X")


def _byte(data: bytes, at: int) -> int:
    if at >= len(data):
        raise OpenPgpError("the key ends inside a packet header")
    return data[at]


def _slice(data: bytes, at: int, length: int) -> bytes:
    if at + length > len(data):
        raise OpenPgpError("the key ends inside a packet")
    return data[at:at + length]


def key_problem(text: str, pins: list[str]) -> str:
    """"" when TEXT is an armored key whose primary keys include a pinned fingerprint, else what is wrong, worded
    to follow "the repository key from URL"."""
    try:
        found = fingerprints(text)
    except OpenPgpError as error:
        return f"is not an ASCII-armored OpenPGP public key ({error})"
    wanted = [normalize(pin) for pin in pins]
    if set(found) & set(wanted):
        return ""
    return (f"has fingerprint {', '.join(found)}, which is none of the pinned {', '.join(wanted)}")
