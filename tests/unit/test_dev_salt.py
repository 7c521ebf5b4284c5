"""The dev stack's committed passphrase salt opens with the dev passphrase, so `pulumi stack
init` on a fresh clone finds a salt, uses it and leaves the tracked stack file alone.

What Pulumi does with it (pulumi v3.259.0, the newest tag read; the project pins 3.272.0):
- pkg/secrets/passphrase/manager.go `NewPromptingPassphraseSecretsManager`: a stack file
  with `encryptionsalt` is used as is; only a stack without one gets a new salt written.
- same file, `symmetricCrypterFromPhraseAndState`: the state is `v1:<salt, base64>:` then an
  encrypted value that must decrypt to "pulumi", else "incorrect passphrase".
- sdk/go/common/resource/config/crypt.go `NewSymmetricCrypterFromPassphrase`: the key is
  PBKDF2-SHA256 of the passphrase and salt, 1,000,000 iterations, 32 bytes; values are
  `v1:<nonce, base64>:<AES-256-GCM ciphertext with tag, base64>`.
- pkg/cmd/pulumi/stack/secrets.go: the stack file is saved only when the secrets settings
  changed (`needsSaveProjectStackAfterSecretManger`).
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
import yaml
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

ROOT = Path(__file__).resolve().parents[2]


def _dev_passphrase() -> str:
    match = re.search(r'^DEV_PASSPHRASE="([^"]+)"$', (ROOT / "scripts/env.sh").read_text(), re.M)
    assert match, "scripts/env.sh no longer sets DEV_PASSPHRASE"
    return match.group(1)


def _opens(state: str, passphrase: str) -> bool:
    version, salt, value = state.split(":", 2)
    assert version == "v1", state
    value_version, nonce, ciphertext = value.split(":")
    assert value_version == "v1", state
    raw_salt, raw_nonce = base64.b64decode(salt, validate=True), base64.b64decode(nonce)
    assert len(raw_salt) == 8 and len(raw_nonce) == 12, "Pulumi makes 8-byte salts, 12-byte nonces"
    key = hashlib.pbkdf2_hmac("sha256", passphrase.encode(), raw_salt, 1_000_000, 32)
    try:
        return AESGCM(key).decrypt(raw_nonce, base64.b64decode(ciphertext), None) == b"pulumi"
    except InvalidTag:
        return False


# The stacks that live on this machine only (kind, the loopback fleet) share the dev
# passphrase, so `pulumi stack init` on a fresh clone leaves their tracked files alone.
LOCAL_STACKS = ("dev", "loopback")


@pytest.fixture(scope="module", params=LOCAL_STACKS)
def dev_salt(request: pytest.FixtureRequest) -> str:
    path = ROOT / f"stacks/Pulumi.{request.param}.yaml"
    salt = yaml.safe_load(path.read_text()).get("encryptionsalt")
    assert salt, f"{path.name} has no encryptionsalt: stack init would write one"
    return salt


def test_the_committed_salt_opens_with_the_dev_passphrase(dev_salt: str) -> None:
    assert _opens(dev_salt, _dev_passphrase())


def test_another_passphrase_is_refused_as_pulumi_would(dev_salt: str) -> None:
    # Proves the check above can fail: the salt binds the stack to one passphrase.
    assert not _opens(dev_salt, _dev_passphrase() + "x")


def test_only_the_local_stacks_commit_a_salt() -> None:
    """Every other stack brings its own passphrase; a committed salt would bind it to ours."""
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        if path.name not in {f"Pulumi.{name}.yaml" for name in LOCAL_STACKS}:
            assert "encryptionsalt" not in (yaml.safe_load(path.read_text()) or {}), path.name
