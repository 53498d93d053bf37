"""C2SP signed notes, checkpoints and cosignatures, checked against the specifications' own
examples, Go's golang.org/x/mod/sumdb/note test vectors, and a second verifier written here
from the specification text alone.

Specifications: https://c2sp.org/signed-note, https://c2sp.org/tlog-checkpoint,
https://c2sp.org/tlog-cosignature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import re
import struct
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit.errors import IntegrityError, PlauditError, ValidationError
from plaudit.store.signed_note import (
    COSIGNATURE_V1,
    ED25519,
    Ed25519Signer,
    InvalidSignatureError,
    Note,
    Signature,
    UnverifiedNoteError,
    VerifierKey,
    check_key_name,
    cosignature_message,
    format_note,
    key_id,
    open_note,
    parse_note,
    parse_signer_key,
    parse_verifier_key,
    sign_note,
)
from plaudit.store.tlog_checkpoint import (
    Checkpoint,
    Cosigner,
    cosignature_timestamp,
    open_checkpoint,
    parse_checkpoint,
    sign_checkpoint,
)

# -- the specifications' examples --------------------------------------------------------------

# c2sp.org/signed-note, "Verifier keys", "Example": this key verifies this note.
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n"
    "\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmR"
    "KuwHjG1Yu72IneyaQM=\n"
)
# c2sp.org/signed-note, the opening example: a text with an empty line of its own.
SPEC_POEM = (
    "Ognuno sta solo sul cuor della terra\n"
    "trafitto da un raggio di sole:\n"
    "\n"
    "ed è subito sera.\n"
    "\n"
    "— quasimodo.example/salvatore NnugSzTjtVAewIS+Z/iJhUPeFDkO/5QQ2i5ddnGITLlC+EhfLW9oJKONrMouF"
    "SQU0xMcXxj99ihAQwaqP3ZekRwNtIc=\n"
)
# c2sp.org/tlog-checkpoint, the opening example, and c2sp.org/tlog-cosignature's, which adds
# a witness's cosignature to it.
SPEC_CHECKPOINT_TEXT = (
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
)
SPEC_LOG_SIG = (
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcy"
    "v2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)
SPEC_COSIG = (
    "— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2"
    "oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
)
# c2sp.org/tlog-cosignature, "Ed25519 signed message": what that cosignature signs.
SPEC_COSIGNED_MESSAGE = (
    "cosignature/v1\n"
    "time 1679315147\n"
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
)

# -- Go's golang.org/x/mod/sumdb/note (package documentation and note_test.go) -----------------

PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
PETER_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6"
    "KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WW"
    "d1RvMc+QQ=\n"
)

# github.com/transparency-dev/formats note tests: a signer key whose base64 holds '+', a
# type-0x01 verifier key, a witness's type-0x04 verifier key, and a cosignature's timestamp.
LOGANDMAP_SKEY = "PRIVATE+KEY+logandmap+38581672+AXJ0FKWOcO2ch6WC8kP705Ed3Gxu7pVtZLhfHAQwp+FE"
LOGANDMAP_VKEY = "logandmap+38581672+Ab/PCr1eCclRPRMBqw/r5An1xO71MCnImLiospEq6b4l"
TEST_VKEY = "TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6"
REMORA_WITNESS_VKEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
COSIG_WITH_TIME = (
    "ZGhGuQAAAABm/qTPeyKXD+R2rzyQsxPiP8mXum7qq/iF0u4vanlqJyocWODBt97w9uL+8qT7S5gxEHWWOworDcFiEBYJ"
    "XORmnFBOBA=="
)


# -- an independent verifier, written from the specification text -----------------------------


class SpecReject(Exception):
    """The independent verifier refuses the note."""


def spec_key(vkey: str) -> tuple[bytes, int, int, bytes]:
    """(name, key ID, signature type, public key) from a vkey string, checked as the
    signed-note text describes it."""
    name, key_hash, material = vkey.split("+", 2)
    raw = base64.b64decode(material, validate=True)
    digest = hashlib.sha256(name.encode() + b"\x0a" + raw).digest()
    if struct.unpack(">I", digest[:4])[0] != int(key_hash, 16) or len(raw) != 33:
        raise SpecReject("vkey")
    return name.encode(), int(key_hash, 16), raw[0], raw[1:]


SIG_LINE = re.compile(rb"\xe2\x80\x94 ([^ \n]+) ([A-Za-z0-9+/]+={0,2})\n")


def spec_open(note: bytes, vkeys: list[str]) -> tuple[bytes, set[str]]:
    """The note's text and the names of the keys whose signatures verified; SpecReject if the
    note is malformed, a known key's signature fails, or no known key signed."""
    keys = {(name, kid): (t, pub) for name, kid, t, pub in map(spec_key, vkeys)}
    try:
        decoded = note.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecReject("utf-8") from e
    if any(ord(c) < 0x20 and c != "\n" for c in decoded):
        raise SpecReject("control character")
    cut = note.rfind(b"\n\n")
    if cut < 0:
        raise SpecReject("no blank line")
    text, block = note[: cut + 1], note[cut + 2 :]
    lines = list(SIG_LINE.finditer(block))
    if not lines or b"".join(m.group(0) for m in lines) != block:
        raise SpecReject("signature lines")
    good: set[str] = set()
    for m in lines:
        try:
            blob = base64.b64decode(m.group(2), validate=True)
        except binascii.Error as e:
            raise SpecReject("base64") from e
        if base64.b64encode(blob) != m.group(2) or len(blob) < 5 or b"+" in m.group(1):
            raise SpecReject("signature encoding")
        key = keys.get((m.group(1), struct.unpack(">I", blob[:4])[0]))
        if key is None:
            continue  # unknown keys are ignored
        sig_type, public = key
        body = blob[4:]
        if sig_type == 0x04:  # tlog-cosignature: u64 timestamp || Ed25519 signature
            if len(body) != 72:
                raise SpecReject("cosignature length")
            seconds = struct.unpack(">Q", body[:8])[0]
            message = b"cosignature/v1\ntime " + str(seconds).encode() + b"\n" + text
            body = body[8:]
        else:
            message = text
        try:
            Ed25519PublicKey.from_public_bytes(public).verify(body, message)
        except InvalidSignature as e:
            raise SpecReject("signature") from e
        good.add(m.group(1).decode())
    if not good:
        raise SpecReject("no known signature")
    return text, good


# -- fixtures ----------------------------------------------------------------------------------

LOG = Ed25519Signer(
    "example.com/plaudit-log", Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
)
WITNESS = Cosigner("witness.example/w1", Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64))))
ROOT = hashlib.sha256(b"root").digest()


def rejected(fn, *args, **kwargs) -> PlauditError:
    with pytest.raises((ValidationError, IntegrityError)) as info:
        fn(*args, **kwargs)
    return info.value


# -- signed-note: the specification's examples --------------------------------------------------


def test_the_spec_verifier_key_verifies_the_spec_note() -> None:
    key = parse_verifier_key(SPEC_VKEY)
    assert (key.name, key.key_id, key.sig_type) == ("example.com/foo", 0x530D903A, ED25519)
    assert str(key) == SPEC_VKEY
    assert key_id(key.name, ED25519, key.public_key) == 0x530D903A
    opened = open_note(SPEC_NOTE.encode(), [key])
    assert opened.text == "This is an example message.\n"
    assert opened.signed_by(key) and opened.unverified == ()
    assert spec_open(SPEC_NOTE.encode(), [SPEC_VKEY])[1] == {"example.com/foo"}


def test_the_spec_poem_splits_at_the_last_blank_line() -> None:
    note = parse_note(SPEC_POEM.encode())
    assert note.text == (
        "Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\n"
        "ed è subito sera.\n"
    )
    (sig,) = note.signatures
    assert (sig.name, sig.key_id, len(sig.signature)) == (
        "quasimodo.example/salvatore",
        0x367BA04B,
        64,
    )
    assert format_note(note.text, note.signatures) == SPEC_POEM.encode()
    # Its key is not published: with other keys known, the signature is ignored, not failed.
    err = rejected(open_note, SPEC_POEM, [parse_verifier_key(SPEC_VKEY)])
    assert isinstance(err, UnverifiedNoteError) and err.note == note
    assert "no signature by a known key" in str(err)


def test_the_spec_checkpoint_reads_and_writes_back_the_same_bytes() -> None:
    note = parse_note(SPEC_CHECKPOINT_TEXT + "\n" + SPEC_LOG_SIG)
    checkpoint = parse_checkpoint(note.text)
    assert checkpoint.origin == "example.com/behind-the-sofa"
    assert checkpoint.size == 20852163
    assert checkpoint.root_hash == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert checkpoint.extensions == ()
    assert checkpoint.text() == SPEC_CHECKPOINT_TEXT
    (sig,) = note.signatures
    assert sig.name == checkpoint.origin  # "The log's key name ... SHOULD match the origin line."
    assert (sig.key_id, len(sig.signature)) == (0x033DE0AE, 64)


def test_the_spec_cosignature_carries_the_time_of_the_spec_message() -> None:
    note = parse_note(SPEC_CHECKPOINT_TEXT + "\n" + SPEC_LOG_SIG + SPEC_COSIG)
    log_sig, cosig = note.signatures
    assert (cosig.name, cosig.key_id, len(cosig.signature)) == (
        "witness.example.com/w1",
        0x8D66CF3F,
        72,
    )
    assert cosignature_timestamp(cosig) == 1679315147
    message = cosignature_message(note.text.encode(), cosignature_timestamp(cosig))
    assert message == SPEC_COSIGNED_MESSAGE.encode()
    with pytest.raises(ValidationError, match="72"):
        cosignature_timestamp(log_sig)  # a plain Ed25519 signature has no timestamp


# -- Go's golang.org/x/mod/sumdb/note vectors --------------------------------------------------


def test_go_signer_key_signs_the_go_note_byte_for_byte() -> None:
    signer = parse_signer_key(PETER_SKEY)
    assert str(signer.verifier_key) == PETER_VKEY
    assert signer.signer_key() == PETER_SKEY
    assert sign_note(PETER_TEXT, signer) == (PETER_TEXT + "\n" + PETER_SIG).encode()
    # Re-signing replaces the key's earlier signature, as Go's note.Sign does.
    stale = Signature("PeterNeumann", 0xC74F20A3, b"stale")
    assert (
        sign_note(PETER_TEXT, signer, existing=[stale]) == (PETER_TEXT + "\n" + PETER_SIG).encode()
    )


def test_go_open_cases() -> None:
    peter, enoch = parse_verifier_key(PETER_VKEY), parse_verifier_key(ENOCH_VKEY)
    both = (PETER_TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode()
    one = open_note(both, [peter])
    assert [s.name for s in one.verified] == ["PeterNeumann"]
    assert [(s.name, s.key_id) for s in one.unverified] == [("EnochRoot", 0xAF0CFE78)]
    two = open_note(both, [peter, enoch])
    assert [s.name for s in two.verified] == ["PeterNeumann", "EnochRoot"] and not two.unverified
    none = rejected(open_note, both, [])
    assert isinstance(none, UnverifiedNoteError) and len(none.note.signatures) == 2
    assert spec_open(both, [PETER_VKEY, ENOCH_VKEY])[1] == {"PeterNeumann", "EnochRoot"}
    # Go's "invalid signature" case: four characters spliced into Peter's signature.
    spliced = PETER_TEXT + "\n" + PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    err = rejected(open_note, spliced, [peter])
    assert isinstance(err, InvalidSignatureError) and "PeterNeumann+c74f20a3" in str(err)
    # More signatures than the limit (Go's is 100, as is this module's default).
    assert "more than the limit of 100" in str(
        rejected(open_note, PETER_TEXT + "\n" + PETER_SIG * 101, [peter])
    )


@pytest.mark.parametrize(
    "message",
    [
        PETER_TEXT,
        PETER_TEXT + "\n",
        PETER_TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + PETER_TEXT + "\n" + PETER_SIG,
        b"\xff" + (PETER_TEXT + "\n" + PETER_SIG).encode(),
        PETER_TEXT
        + "\n— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgK"
        "vqfqdngotpRZb6KE6RyyBwJnAM=",
        PETER_TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
    ],
)
def test_go_malformed_notes_are_validation_errors(message: str | bytes) -> None:
    with pytest.raises(ValidationError):
        open_note(message, [parse_verifier_key(PETER_VKEY)])
    with pytest.raises(SpecReject):
        spec_open(message if isinstance(message, bytes) else message.encode(), [PETER_VKEY])


@pytest.mark.parametrize("key", [PETER_VKEY, PETER_SKEY])
def test_go_key_manglings_are_refused(key: str) -> None:
    """Go's TestNewVerifier/TestNewSigner: every proper substring and every +1 of one byte."""
    parse = parse_signer_key if key.startswith("PRIVATE") else parse_verifier_key
    secret = key.split("+", 4)[4] if parse is parse_signer_key else None
    variants = {key[i:j] for i in range(len(key) + 1) for j in range(i + 1, len(key) + 1)}
    variants |= {key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :] for i in range(len(key))}
    variants.discard(key)
    for variant in variants:
        with pytest.raises(ValidationError) as info:
            parse(variant)
        if secret:
            assert secret[4:20] not in str(info.value), "an error quoted the private key"


def test_go_keys_with_adjusted_hashes_are_refused() -> None:
    # Go refuses it for its length; it is not canonical base64 either, which is found first.
    with pytest.raises(ValidationError, match="key: "):
        parse_verifier_key(
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY=="
        )
    with pytest.raises(ValidationError, match="0x65 is not supported"):
        parse_verifier_key("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")


def test_other_implementations_keys_parse_and_agree() -> None:
    assert str(parse_signer_key(LOGANDMAP_SKEY).verifier_key) == LOGANDMAP_VKEY
    assert str(parse_verifier_key(TEST_VKEY)) == TEST_VKEY  # base64 holding '+'
    witness = parse_verifier_key(REMORA_WITNESS_VKEY)
    assert (witness.sig_type, witness.key_id) == (COSIGNATURE_V1, 0xDA77ADE7)
    sig = Signature("w", 1, base64.b64decode(COSIG_WITH_TIME)[4:])
    assert cosignature_timestamp(sig) == 1727964367


# -- signed-note: the rules, one by one ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "non-empty"),
        ("a b", "space"),
        ("a\u00a0b", "U+00A0"),
        ("a\u2009b", "U+2009"),
        ("a\u3000b", "U+3000"),
        ("a+b", "'+'"),
        ("a\x01b", "U+0001"),
        ("a\ud800", "surrogate"),
    ],
)
def test_key_name_rules(name: str, why: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(why)):
        check_key_name(name)


def test_key_names_may_be_any_other_unicode() -> None:
    for name in ("example.com/log42", "oid/1.3.6.1.4.1", "ログ", "a\u200bb", "x=y;z"):
        assert check_key_name(name) == name
        assert parse_verifier_key(str(VerifierKey.ed25519(name, LOG.verifier_key.public_key)))


@pytest.mark.parametrize(
    ("vkey", "what"),
    [
        (SPEC_VKEY + "\n", "leading or trailing whitespace"),
        ("example.com/foo+530d903a", "three parts"),
        ("example.com/foo+530D903A+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "lowercase hex"),
        ("example.com/foo+530d903+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "8 lowercase"),
        ("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2", "base64"),
        ("example.com/foo+530d903a+", "is empty"),
        ("example.com/bar+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "does not match"),
        ("a b+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "space"),
        (PETER_SKEY, "private signer key"),
    ],
)
def test_verifier_key_errors_name_the_part(vkey: str, what: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(what)) as info:
        parse_verifier_key(vkey)
    assert str(info.value).startswith("verifier key: ")
    assert "\n" not in str(info.value)
    if vkey == PETER_SKEY:
        assert "AYEKFALV" not in str(info.value)


def test_unsupported_signature_types_and_key_lengths_are_named() -> None:
    public = LOG.verifier_key.public_key
    short = base64.b64encode(b"\x01" + public[:31]).decode()
    with pytest.raises(ValidationError, match="32 bytes after the type byte, got 31"):
        parse_verifier_key(f"x+{key_id('x', ED25519, public[:31]):08x}+{short}")
    for sig_type in (0x02, 0x05, 0x06, 0xFF):
        kid = key_id("x", sig_type, public)
        text = f"x+{kid:08x}+{base64.b64encode(bytes([sig_type]) + public).decode()}"
        with pytest.raises(ValidationError, match=f"0x{sig_type:02x} is not supported"):
            parse_verifier_key(text)


def test_a_verifier_key_is_checked_when_built() -> None:
    good = LOG.verifier_key
    with pytest.raises(ValidationError, match="does not match"):
        VerifierKey(good.name, good.key_id ^ 1, good.sig_type, good.public_key)
    with pytest.raises(ValidationError, match="32 bytes"):
        VerifierKey.ed25519("x", b"\x00" * 31)


def test_one_key_gets_a_different_id_per_signature_type() -> None:
    """signed-note: a key reused for another type MUST get another key ID; so a cosignature
    never passes for a log signature, nor the reverse."""
    shared = Ed25519PrivateKey.from_private_bytes(b"\x07" * 32)
    as_log, as_witness = Ed25519Signer("same.example", shared), Cosigner("same.example", shared)
    assert as_log.key_id != as_witness.key_id
    note = sign_checkpoint(Checkpoint("o", 1, ROOT), as_witness)
    assert isinstance(rejected(open_note, note, [as_log.verifier_key]), UnverifiedNoteError)
    assert open_note(note, [as_witness.verifier_key]).verified


@pytest.mark.parametrize(
    ("note", "what"),
    [
        ("a\r\n\n" + PETER_SIG, "carriage return"),
        ("a\n\n" + PETER_SIG.replace("\n", "\r\n"), "carriage return"),
        ("a\tb\n\n" + PETER_SIG, "line 1: holds a control character (U+0009)"),
        ("a\n" + PETER_SIG, "no blank line"),
        ("a\n\n", "no signature line"),
        ("a\n\n" + PETER_SIG[:-1], "does not end with a newline"),
        ("a\n\n- PeterNeumann AAAAAAA=\n", "em dash"),
        ("a\n\n—PeterNeumann AAAAAAA=\n", "em dash"),
        ("a\n\n— PeterNeumann\n", "'— <key name> <base64 signature>'"),
        ("a\n\n— Peter+Neumann AAAAAAA=\n", "'+'"),
        ("a\n\n— PeterNeumann  AAAAAAA=\n", "base64"),
        ("a\n\n— PeterNeumann AAAAAAA\n", "base64"),  # unpadded
        ("a\n\n— PeterNeumann AAAAAAB=\n", "base64"),  # non-zero unused bits
        ("a\n\n— PeterNeumann AAAAAA==\n", "4-byte key ID and more"),
        ("a\n\n" + PETER_SIG + "\n", "no signature line"),  # the last blank line splits
    ],
)
def test_malformed_notes_name_what_is_wrong(note: str, what: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(what)) as info:
        parse_note(note)
    assert str(info.value).startswith("signed note: ")


def test_invalid_utf8_is_named_with_its_offset() -> None:
    with pytest.raises(ValidationError, match="not valid UTF-8 at byte 2"):
        parse_note(b"ab\xc3(\n\n" + PETER_SIG.encode())
    with pytest.raises(ValidationError, match="not valid UTF-8"):
        parse_note("a\ud800\n\n" + PETER_SIG)


def test_size_limits() -> None:
    """At least 16 signatures MUST be accepted; the caller may lower or raise the limits."""
    signers = [Ed25519Signer.generate(f"k{i}.example") for i in range(16)]
    note = sign_note("sixteen\n", *signers)
    assert len(open_note(note, [s.verifier_key for s in signers]).verified) == 16
    assert "limit of 15" in str(rejected(parse_note, note, max_signatures=15))
    assert "bytes, more than the limit of 100" in str(rejected(parse_note, note, max_bytes=100))


def test_unknown_keys_are_ignored_even_when_they_share_a_name_or_an_id() -> None:
    """signed-note: unknown if name or ID differ, even if the other matches a known key."""
    impostor_name = Ed25519Signer.generate(LOG.name)  # same name, other key, other ID
    other = Ed25519Signer.generate("other.example")
    note = sign_note("hello\n", LOG, impostor_name, other)
    same_id = Signature("someone.else", LOG.key_id, b"\x00" * 64)  # same ID, other name
    note += same_id.line().encode()
    opened = open_note(note, [LOG.verifier_key])
    assert [s.label for s in opened.verified] == [LOG.verifier_key.label]
    assert len(opened.unverified) == 3


def test_a_bad_signature_by_a_known_key_rejects_the_note_even_beside_a_good_one() -> None:
    good = LOG.sign(b"x\n")
    forged = Signature(LOG.name, LOG.key_id, b"\x01" * 64)
    for sigs in ([good, forged], [forged, good]):
        note = format_note("x\n", sigs)
        err = rejected(open_note, note, [LOG.verifier_key])
        assert isinstance(err, InvalidSignatureError)
        with pytest.raises(SpecReject):
            spec_open(note, [str(LOG.verifier_key)])


def test_two_different_keys_with_one_name_and_id_are_refused() -> None:
    """Key IDs are 32 bits, so a collision under one name takes ~2^16 tries (a birthday)."""
    seen: dict[bytes, bytes] = {}
    for i in itertools.count():
        public = i.to_bytes(32, "big")
        kid = hashlib.sha256(b"c\n\x01" + public).digest()[:4]
        if kid in seen:
            break
        seen[kid] = public
    first, second = VerifierKey.ed25519("c", seen[kid]), VerifierKey.ed25519("c", public)
    assert first.label == second.label and first != second
    with pytest.raises(ValidationError, match=re.escape("share the name and ID c+")):
        open_note(sign_note("x\n", LOG), [LOG.verifier_key, first, second])
    real = LOG.verifier_key
    assert open_note(sign_note("x\n", LOG), [real, real]).verified  # the same key twice is fine


def test_sign_note_refuses_text_that_is_not_a_note_text() -> None:
    for text, what in (("no newline", "ending in a newline"), ("a\rb\n", "carriage return")):
        with pytest.raises(ValidationError, match=what):
            sign_note(text, LOG)
    with pytest.raises(ValidationError, match="at least one"):
        format_note("x\n", [])


def test_signer_key_round_trip_and_no_secret_in_repr() -> None:
    signer = Ed25519Signer.generate("example.com/round")
    again = parse_signer_key(signer.signer_key())
    assert again.verifier_key == signer.verifier_key
    assert open_note(sign_note("t\n", again), [signer.verifier_key]).verified
    assert signer.signer_key().split("+")[-1] not in repr(signer)
    with pytest.raises(ValidationError, match="must be 0x01"):
        kid = key_id("w", COSIGNATURE_V1, WITNESS.verifier_key.public_key)
        parse_signer_key(
            f"PRIVATE+KEY+w+{kid:08x}+" + base64.b64encode(b"\x04" + bytes(32)).decode()
        )


# -- tlog-checkpoint -----------------------------------------------------------------------------


def test_checkpoint_text_is_the_spec_layout() -> None:
    cp = Checkpoint("example.com/log", 20, ROOT, ("ext one", "ext two"))
    root = base64.b64encode(ROOT).decode()
    assert cp.text() == f"example.com/log\n20\n{root}\next one\next two\n"
    assert parse_checkpoint(cp.text()) == cp
    assert parse_checkpoint(cp.text().encode()) == cp
    empty = Checkpoint("o", 0, hashlib.sha256(b"").digest())
    assert parse_checkpoint(empty.text()).size == 0


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("o\n012\n{r}\n", "without leading zeros"),
        ("o\n00\n{r}\n", "without leading zeros"),
        ("o\n+5\n{r}\n", "without leading zeros"),
        ("o\n-1\n{r}\n", "without leading zeros"),
        ("o\n 5\n{r}\n", "without leading zeros"),
        ("o\n5 \n{r}\n", "without leading zeros"),
        ("o\n1_000\n{r}\n", "without leading zeros"),
        ("o\n\u0661\n{r}\n", "without leading zeros"),  # an Arabic-Indic digit one
        ("o\n18446744073709551616\n{r}\n", "larger than 2^64-1"),
        ("o\n5\n{r}", "must end with a newline"),
        ("o\n5\n", "needs origin, tree size and root hash"),
        ("\n5\n{r}\n", "line 1: is empty"),
        ("o\n5\n{r}\n\next\n", "line 4: is empty"),
        ("o\n5\n{r}\n\n", "line 4: is empty"),
        ("o\n5\nAAAA\n", "canonical base64 of 32 bytes"),
        ("o\n5\n{r_unpadded}\n", "canonical base64 of 32 bytes"),
        ("o\n5\n{r_bits}\n", "canonical base64 of 32 bytes"),
        ("o\x01\n5\n{r}\n", "origin (line 1): holds the control character U+0001"),
        ("o\n5\n{r}\nx\ty\n", "extension line 1 (line 4): holds the control character U+0009"),
    ],
)
def test_malformed_checkpoints_name_the_line(text: str, what: str) -> None:
    r = base64.b64encode(ROOT).decode()
    text = text.format(r=r, r_unpadded=r.rstrip("="), r_bits=r[:-2] + "B=")
    with pytest.raises(ValidationError, match=re.escape(what)) as info:
        parse_checkpoint(text)
    assert str(info.value).startswith("checkpoint: ")


def test_the_largest_tree_size_reads_back() -> None:
    cp = Checkpoint("o", 2**64 - 1, ROOT)
    assert parse_checkpoint(cp.text()).size == 2**64 - 1


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({"origin": ""}, "non-empty"),
        ({"origin": "a\nb"}, "U+000A"),
        ({"size": -1}, "0..2^64-1"),
        ({"size": 2**64}, "0..2^64-1"),
        ({"size": True}, "0..2^64-1"),
        ({"root_hash": b"\x00" * 31}, "32 bytes"),
        ({"extensions": ("",)}, "non-empty"),
        ({"extensions": ["x"]}, "tuple"),
    ],
)
def test_checkpoint_fields_are_checked_when_built(kwargs: dict, what: str) -> None:
    fields = {"origin": "o", "size": 1, "root_hash": ROOT, **kwargs}
    with pytest.raises(ValidationError, match=re.escape(what)):
        Checkpoint(**fields)


def test_origin_may_hold_spaces_and_plus_signs() -> None:
    """tlog-checkpoint: clients MUST NOT assume the origin follows the recommended form."""
    cp = Checkpoint("My Log + friends", 3, ROOT)
    assert parse_checkpoint(cp.text()) == cp


def test_sign_and_open_a_checkpoint() -> None:
    cp = Checkpoint(LOG.name, 1234, ROOT)
    note = sign_checkpoint(cp, LOG)
    opened = open_checkpoint(note, LOG.verifier_key, origin=LOG.name)
    assert opened.checkpoint == cp
    assert opened.cosigned_at(WITNESS.verifier_key) is None
    with pytest.raises(ValidationError, match="not a cosignature key"):
        opened.cosigned_at(LOG.verifier_key)
    assert spec_open(note, [str(LOG.verifier_key)]) == (cp.text().encode(), {LOG.name})


def test_open_checkpoint_needs_the_logs_own_signature() -> None:
    cp = Checkpoint(LOG.name, 1, ROOT)
    only_witness = sign_checkpoint(cp, WITNESS)
    err = rejected(
        open_checkpoint, only_witness, LOG.verifier_key, witnesses=[WITNESS.verifier_key]
    )
    assert "no signature by the log's key" in str(err)
    err = rejected(open_checkpoint, sign_checkpoint(cp, LOG), LOG.verifier_key, origin="other")
    assert "not 'other'" in str(err)
    with pytest.raises(ValidationError, match="tree size"):
        open_checkpoint(sign_note("o\nnot a size\nx\n", LOG), LOG.verifier_key)
    with pytest.raises(ValidationError, match="not a cosignature"):
        open_checkpoint(sign_checkpoint(cp, LOG), LOG.verifier_key, witnesses=[LOG.verifier_key])


# -- tlog-cosignature ----------------------------------------------------------------------------


def test_a_cosignature_signs_the_spec_message() -> None:
    cp = Checkpoint(LOG.name, 99, ROOT, ("an extension",))
    cosig = WITNESS.cosign(cp, timestamp=1679315147)
    assert cosig.signature[:8] == (1679315147).to_bytes(8, "big")
    assert cosignature_timestamp(cosig) == 1679315147
    message = b"cosignature/v1\ntime 1679315147\n" + cp.text().encode()
    public = Ed25519PublicKey.from_public_bytes(WITNESS.verifier_key.public_key)
    public.verify(cosig.signature[8:], message)  # raises if the message differs
    assert WITNESS.verifier_key.sig_type == COSIGNATURE_V1
    expected_id = hashlib.sha256(
        WITNESS.name.encode() + b"\n\x04" + WITNESS.verifier_key.public_key
    ).digest()[:4]
    assert WITNESS.key_id == int.from_bytes(expected_id, "big")


def test_a_witness_cosigns_a_log_signed_checkpoint() -> None:
    cp = Checkpoint(LOG.name, 7, ROOT)
    received = parse_note(sign_checkpoint(cp, LOG))
    witness = Cosigner(
        WITNESS.name, Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64))), clock=lambda: 42.0
    )
    cosigned = sign_checkpoint(
        parse_checkpoint(received.text), witness, existing=received.signatures
    )
    opened = open_checkpoint(cosigned, LOG.verifier_key, witnesses=[WITNESS.verifier_key])
    assert opened.cosigned_at(WITNESS.verifier_key) == 42
    assert spec_open(cosigned, [str(LOG.verifier_key), str(WITNESS.verifier_key)])[1] == {
        LOG.name,
        WITNESS.name,
    }
    # A verifier that knows only the log's key ignores the cosignature.
    assert open_checkpoint(cosigned, LOG.verifier_key).note.unverified[0].name == WITNESS.name
    # The timestamp is signed: moving it breaks the cosignature.
    cosig = parse_note(cosigned).signatures[1]
    moved = Signature(cosig.name, cosig.key_id, (43).to_bytes(8, "big") + cosig.signature[8:])
    tampered = format_note(cp.text(), [*received.signatures, moved])
    err = rejected(open_checkpoint, tampered, LOG.verifier_key, witnesses=[WITNESS.verifier_key])
    assert isinstance(err, InvalidSignatureError)


def test_cosigner_signs_only_checkpoints_and_only_valid_times() -> None:
    with pytest.raises(ValidationError, match="tree size"):
        sign_note("just some text\nno\nno\n", WITNESS)
    assert open_note(sign_note(Checkpoint("o", 1, ROOT).text(), WITNESS), [WITNESS.verifier_key])
    for bad in (-1, 2**63, 1.5):
        with pytest.raises(ValidationError, match="timestamp"):
            WITNESS.cosign(Checkpoint("o", 1, ROOT), timestamp=bad)
    fixed = Cosigner("w.example", Ed25519PrivateKey.generate(), clock=lambda: 1700000000.9)
    assert cosignature_timestamp(fixed.cosign(Checkpoint("o", 1, ROOT))) == 1700000000


def test_a_timestamp_past_2_63_never_verifies() -> None:
    private = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
    text = Checkpoint("o", 1, ROOT).text().encode()
    late = 2**63
    raw = late.to_bytes(8, "big") + private.sign(cosignature_message(text, late))
    assert not WITNESS.verifier_key.verify(text, raw)
    ok = 2**63 - 1
    raw = ok.to_bytes(8, "big") + private.sign(cosignature_message(text, ok))
    assert WITNESS.verifier_key.verify(text, raw)


# -- properties ----------------------------------------------------------------------------------

NAME_CHARS = st.characters(
    blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters="+"
)
LINE_CHARS = st.characters(blacklist_categories=("Cs", "Cc"))
names = st.text(NAME_CHARS, min_size=1, max_size=20)
texts = st.lists(st.text(LINE_CHARS, max_size=30), min_size=1, max_size=5).map(
    lambda lines: "\n".join(lines) + "\n"
)
signatures = st.builds(
    Signature, names, st.integers(0, 2**32 - 1), st.binary(min_size=1, max_size=80)
)
checkpoints = st.builds(
    Checkpoint,
    st.text(LINE_CHARS, min_size=1, max_size=30),
    st.integers(0, 2**64 - 1),
    st.binary(min_size=32, max_size=32),
    st.lists(st.text(LINE_CHARS, min_size=1, max_size=20), max_size=3).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(texts, st.lists(signatures, min_size=1, max_size=4))
def test_parse_of_format_is_identity_for_notes(text: str, sigs: list[Signature]) -> None:
    written = format_note(text, sigs)
    assert parse_note(written) == Note(text, tuple(sigs))
    assert format_note(text, parse_note(written).signatures) == written


@settings(max_examples=150, deadline=None)
@given(checkpoints)
def test_parse_of_format_is_identity_for_checkpoints(cp: Checkpoint) -> None:
    assert parse_checkpoint(cp.text()) == cp


@settings(max_examples=100, deadline=None)
@given(names, st.binary(min_size=32, max_size=32), st.sampled_from([ED25519, COSIGNATURE_V1]))
def test_parse_of_format_is_identity_for_verifier_keys(name: str, public: bytes, t: int) -> None:
    key = VerifierKey.ed25519(name, public, t)
    assert parse_verifier_key(str(key)) == key
    assert spec_key(str(key)) == (name.encode(), key.key_id, t, public)


def _mutate(data: bytes, index: int, value: int) -> bytes:
    index %= len(data)
    if data[index] == value:
        value = (value + 1) % 256
    return data[:index] + bytes([value]) + data[index + 1 :]


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(min_value=0), st.integers(0, 255))
def test_any_single_byte_change_to_a_signed_note_is_rejected(text: str, i: int, b: int) -> None:
    note = sign_note(text, LOG)
    assert spec_open(note, [str(LOG.verifier_key)])[1] == {LOG.name}
    changed = _mutate(note, i, b)
    with pytest.raises((ValidationError, IntegrityError)):
        open_note(changed, [LOG.verifier_key])
    with pytest.raises(SpecReject):
        spec_open(changed, [str(LOG.verifier_key)])


@settings(max_examples=300, deadline=None)
@given(checkpoints, st.integers(0, 2**63 - 1), st.integers(min_value=0), st.integers(0, 255))
def test_a_changed_cosigned_checkpoint_is_rejected_or_loses_a_signature(
    cp: Checkpoint, when: int, i: int, b: int
) -> None:
    """With two known keys, a change can turn one signature into an unknown key's, which the
    specification says to ignore; the text itself can never change, nor a verified time."""
    note = format_note(cp.text(), [LOG.sign(cp.text().encode()), WITNESS.cosign(cp, when)])
    keys = [LOG.verifier_key, WITNESS.verifier_key]
    vkeys = [str(k) for k in keys]
    assert spec_open(note, vkeys)[1] == {LOG.name, WITNESS.name}
    changed = _mutate(note, i, b)
    try:
        opened = open_note(changed, keys)
    except (ValidationError, IntegrityError):
        with pytest.raises(SpecReject):
            spec_open(changed, vkeys)
        return
    assert opened.text == cp.text()
    assert len(opened.verified) == 1 and len(opened.unverified) == 1
    assert spec_open(changed, vkeys) == (cp.text().encode(), {opened.verified[0].name})
    if opened.verified[0].name == WITNESS.name:
        assert cosignature_timestamp(opened.verified[0]) == when


def test_the_example_in_the_docs_verifies() -> None:
    """docs/c2sp.md shows a checkpoint and its keys: they must be what this module reads."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "c2sp.md").read_text()
    blocks = re.findall(r"```\n(.*?)```", docs, flags=re.S)
    note, vkeys = blocks[0].encode(), blocks[1].split()
    log_key, witness_key = map(parse_verifier_key, vkeys)
    opened = open_checkpoint(note, log_key, witnesses=[witness_key], origin=log_key.name)
    assert opened.checkpoint.size == 20
    assert opened.cosigned_at(witness_key) == 0x6B0494C8
    assert spec_open(note, vkeys)[1] == {log_key.name, witness_key.name}
