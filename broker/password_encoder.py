"""Kafka's PasswordEncoder: a dynamic broker config's password, encrypted with
`password.encoder.secret` before it is stored (ZooKeeper never holds it in clear).

The stored form is Kafka's: comma-separated `name:value` pairs, `keyFactoryAlgorithm`,
`cipherAlgorithm`, `keyLength` (bits), `iterations`, `salt` (256 random bytes),
`initializationVector` (and `authenticationTagLength` for GCM), `encryptedPassword`
and `passwordLength` (a sanity check on decoding), binary values in base64. The key
is PBKDF2 of the secret over the salt (PBKDF2WithHmacSHA512 by default); the cipher
AES/CBC/PKCS5Padding by default, or AES/GCM/NoPadding. A value encoded by a Kafka
broker decodes here, and the other way round, given the same secret. Pure: no I/O.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"
DEFAULT_CIPHER = "AES/CBC/PKCS5Padding"
DEFAULT_KEY_LENGTH = 128
DEFAULT_ITERATIONS = 4096
_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "PBKDF2WithHmacSHA512": hashes.SHA512,
    "PBKDF2WithHmacSHA256": hashes.SHA256,
    "PBKDF2WithHmacSHA1": hashes.SHA1,
}
_CIPHERS = ("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")
_GCM_TAG_BITS = 128


class PasswordEncoderError(ValueError):
    """A password that cannot be encoded or decoded (the message says why)."""


class PasswordEncoder:
    def __init__(
        self,
        secret: str,
        key_factory: str | None = None,
        cipher: str = DEFAULT_CIPHER,
        key_length: int = DEFAULT_KEY_LENGTH,
        iterations: int = DEFAULT_ITERATIONS,
    ):
        self.secret = secret
        self.key_factory = key_factory or DEFAULT_KEY_FACTORY
        self.cipher = cipher
        self.key_length = key_length
        self.iterations = iterations
        check_settings(self.key_factory, cipher, key_length)

    def _key(self, factory: str, salt: bytes, length: int, iterations: int) -> bytes:
        kdf = PBKDF2HMAC(_HASHES[factory](), length // 8, salt, iterations)
        return kdf.derive(self.secret.encode())

    def encode(self, password: str) -> str:
        salt = os.urandom(256)
        key = self._key(self.key_factory, salt, self.key_length, self.iterations)
        data = password.encode()
        fields = {
            "keyFactoryAlgorithm": self.key_factory,
            "cipherAlgorithm": self.cipher,
            "keyLength": str(self.key_length),
            "salt": _b64(salt),
            "iterations": str(self.iterations),
            "passwordLength": str(len(password)),
        }
        if self.cipher.startswith("AES/GCM/"):
            iv = os.urandom(12)
            encrypted = AESGCM(key).encrypt(iv, data, None)
            fields["authenticationTagLength"] = str(_GCM_TAG_BITS)
        else:
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            padded = padder.update(data) + padder.finalize()
            encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = encryptor.update(padded) + encryptor.finalize()
        fields["initializationVector"] = _b64(iv)
        fields["encryptedPassword"] = _b64(encrypted)
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        try:
            params = dict(item.split(":", 1) for item in encoded.split(","))
            factory = params["keyFactoryAlgorithm"]
            cipher = params["cipherAlgorithm"]
            length = int(params["keyLength"])
            check_settings(factory, cipher, length)
            key = self._key(factory, _unb64(params["salt"]), length, int(params["iterations"]))
            iv = _unb64(params["initializationVector"])
            encrypted = _unb64(params["encryptedPassword"])
            expected = int(params["passwordLength"])
        except (KeyError, ValueError) as e:
            raise PasswordEncoderError(f"Password could not be decoded: {e}") from None
        try:
            if cipher.startswith("AES/GCM/"):
                data = AESGCM(key).decrypt(iv, encrypted, None)
            else:
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                padded = decryptor.update(encrypted) + decryptor.finalize()
                unpadder = padding.PKCS7(128).unpadder()
                data = unpadder.update(padded) + unpadder.finalize()
            password = data.decode()
        except Exception:  # a wrong secret: bad padding, a failed tag, not UTF-8
            raise PasswordEncoderError("Password could not be decoded") from None
        if len(password) != expected:
            raise PasswordEncoderError(
                "Password could not be decoded, sanity check of length failed"
            )
        return password


def check_settings(factory: str, cipher: str, key_length: int) -> None:
    """PasswordEncoderError unless the three are ones this encoder serves."""
    if factory not in _HASHES:
        raise PasswordEncoderError(f"unsupported key factory algorithm {factory}")
    if cipher not in _CIPHERS:
        raise PasswordEncoderError(f"unsupported cipher algorithm {cipher}")
    if key_length not in (128, 192, 256):
        raise PasswordEncoderError(f"unsupported key length {key_length}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)
