"""infra.hosts.openpgp against gpg's own view of keys gpg makes here: the fingerprints the roles pin are the
ones gpg prints, and a key without a pinned one is named as such."""

from __future__ import annotations

from pathlib import Path

import pytest
from aptrepo import SigningKey, make_key

from infra.hosts.openpgp import OpenPgpError, fingerprints, key_problem


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[SigningKey, SigningKey]:
    home = tmp_path_factory.mktemp("gnupg")
    return make_key(home), make_key(home, "rsa key", "rsa2048", "sign,encr")


def test_fingerprints_are_gpg_s(keys: tuple[SigningKey, SigningKey]) -> None:
    ed25519, rsa = keys
    assert fingerprints(ed25519.armored) == [ed25519.fingerprint]
    assert fingerprints(rsa.armored) == [rsa.fingerprint]  # its encryption subkey is not a primary key
    both = ed25519.gpg("--armor", "--export", ed25519.fingerprint, rsa.fingerprint)
    assert fingerprints(both) == [ed25519.fingerprint, rsa.fingerprint]


def test_armor_headers_and_crlf_are_read(keys: tuple[SigningKey, SigningKey]) -> None:
    key, _ = keys
    lines = key.armored.splitlines()
    with_header = "\r\n".join([lines[0], "Comment: published by the repository", *lines[1:]])
    assert fingerprints(with_header) == [key.fingerprint]


def test_a_pinned_fingerprint_as_publishers_print_it_passes(keys: tuple[SigningKey, SigningKey]) -> None:
    key, _ = keys
    spaced = " ".join(key.fingerprint[i:i + 4] for i in range(0, 40, 4)).lower()
    assert key_problem(key.armored, ["0" * 40, spaced]) == ""


def test_a_key_without_a_pinned_fingerprint_is_named(keys: tuple[SigningKey, SigningKey]) -> None:
    key, other = keys
    assert key_problem(key.armored, [other.fingerprint]) == (
        f"has fingerprint {key.fingerprint}, which is none of the pinned {other.fingerprint}")


@pytest.mark.parametrize(("text", "says"), [
    ("<html>404 Not Found</html>", "no '-----BEGIN PGP PUBLIC KEY BLOCK-----' armor"),
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "not valid base64"),
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\ndGVzdA==\n-----END PGP PUBLIC KEY BLOCK-----\n", "not a packet header"),
])
def test_what_is_not_a_key_is_named(text: str, says: str) -> None:
    problem = key_problem(text, ["0" * 40])
    assert problem.startswith("is not an ASCII-armored OpenPGP public key (") and says in problem


def test_a_cut_key_is_refused(keys: tuple[SigningKey, SigningKey]) -> None:
    key, _ = keys
    lines = key.armored.splitlines()
    cut = "\n".join([*lines[:3], lines[-1]])  # the first base64 lines only: the packet ends early
    with pytest.raises(OpenPgpError, match="ends inside a packet"):
        fingerprints(cut)


def test_a_signature_alone_holds_no_key(keys: tuple[SigningKey, SigningKey], tmp_path: Path) -> None:
    key, _ = keys
    (tmp_path / "file").write_text("signed\n")
    signature = key.gpg("--armor", "--detach-sign", "--output", "-", str(tmp_path / "file"))
    armored = signature.replace("PGP SIGNATURE", "PGP PUBLIC KEY BLOCK")
    assert "holds no public key packet" in key_problem(armored, [key.fingerprint])
