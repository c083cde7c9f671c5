"""The one exception type the bridge raises, so callers can tell Deeploy trouble from their own bugs."""
from __future__ import annotations

from ckpt.errors import CkptError


class BridgeError(CkptError):
    """A one-line, user-facing reason why Deeploy could not do what was asked."""

    def __init__(self, message: str) -> None:
        # Keep it to one line: these messages are printed by the CLI and asserted on in tests.
        super().__init__(" ".join(str(message).split()))
