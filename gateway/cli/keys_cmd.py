"""`eventloom keys new | list | export-public | trust`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
import typer

from eventloom.errors import EventValidationError, SignatureError
from eventloom.keys import KeyStore, TrustedKey
from eventloom.validation import decode_json_input
from gateway.cli.common import EXIT_INVALID, console, fail, print_json, settings_of

app = typer.Typer(help="Signing keys and the keyring of trusted public keys.", no_args_is_help=True)


@app.command("new", help="Generate a new signing key, trust it, and sign new events with it.")
def new(
    ctx: typer.Context, comment: Annotated[str, typer.Option(help="A note kept in the keyring")] = ""
) -> None:
    signer = KeyStore(settings_of(ctx).data_dir).new_key(comment=comment)
    console.print(f"new active key {signer.key_id}; older keys stay trusted for verification")


@app.command("list", help="Trusted public keys; the active signing key is marked.")
def list_keys(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    store = KeyStore(settings_of(ctx).data_dir)
    active = store.active_key_id()
    keys = store.load_keyring().keys
    if as_json:
        print_json([{**msgspec.structs.asdict(k), "active": k.key_id == active} for k in keys])
        return
    for key in keys:
        marker = "*" if key.key_id == active else " "
        print(f"{marker} {key.key_id}  {key.added_at}  {key.comment}")


@app.command("export-public", help="Print the trusted public keys as a keyring file others can `keys trust`.")
def export_public(ctx: typer.Context) -> None:
    keys = KeyStore(settings_of(ctx).data_dir).load_keyring().keys
    print(msgspec.json.format(msgspec.json.encode({"keys": keys}), indent=2).decode())


@app.command("trust", help="Add the public keys of an exported keyring file to this keyring.")
def trust(ctx: typer.Context, path: Path) -> None:
    store = KeyStore(settings_of(ctx).data_dir)
    try:
        exported = decode_json_input(path.read_bytes(), "keyring", dict[str, list[TrustedKey]])
        for key in exported.get("keys", []):
            store.trust(key)
    except (OSError, EventValidationError, SignatureError) as exc:
        fail(f"{path}: {exc}", EXIT_INVALID)
    console.print(f"trusted {len(exported.get('keys', []))} key(s) from {path}")
