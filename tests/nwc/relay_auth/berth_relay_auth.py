"""The rule of a relay that keeps a wallet service's events to authenticated writers,
for Berth's NIP-42 test (`tests/harness/nwc.rs`, `Strict::auth`). nostr-relay loads it
through its own authenticator interface (`authentication.authenticator_class`, with
this directory on PYTHONPATH); its built-in rules grant by roles set per public key
beforehand, which cannot say "the event's own author".

- Reading (REQ) is open: apps read their answers without authenticating, as Alby's
  SDK does.
- Publishing (EVENT) needs NIP-42 AUTH as the event's author, except for the kinds in
  `open_kinds` (the apps' requests, 23194).
"""
from nostr_relay.auth import Action, Authenticator


class AuthorOnly(Authenticator):
    def __init__(self, storage, options):
        super().__init__(storage, options)
        self.open_kinds = set(options.get("open_kinds", []))

    async def can_do(self, auth_token, action, target=None):
        if not self.is_enabled:
            return True
        if action != Action.save.value:
            return True
        if target is not None and target.kind in self.open_kinds:
            return True
        author = (auth_token or {}).get("pubkey")
        return bool(author) and (target is None or author == target.pubkey)
