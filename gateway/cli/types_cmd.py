"""`eventloom types [TYPE] [--json]`: the event types one may append, with payload schemas and examples."""

from __future__ import annotations

import json
from typing import Annotated

import msgspec
import typer

from eventloom.errors import EventValidationError
from eventloom.schemas import COMMON_EVENT_TYPES, OPEN_EVENT_TYPE_RULE, EventTypeInfo, describe_event_types
from gateway.cli.common import EXIT_INVALID, fail, print_json

TypeArgument = Annotated[
    str | None, typer.Argument(help="One event type: its payload schema and example (default: list them all)")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON: types, common ones, open-type rule")]


def register(app: typer.Typer) -> None:
    app.command(
        "types",
        help="List the event types one may append, or describe one (payload schema, example); offline.",
    )(types_command)


def types_command(event_type: TypeArgument = None, as_json: JsonOption = False) -> None:
    try:
        described = describe_event_types(None if event_type is None else [event_type])
    except EventValidationError as exc:
        fail(f"invalid input: {exc}", EXIT_INVALID)
    if as_json:
        print_json(
            {
                "types": msgspec.to_builtins(described),
                "common": list(COMMON_EVENT_TYPES),
                "open_types": OPEN_EVENT_TYPE_RULE,
            }
        )
    elif event_type is None:
        _print_list(described)
    else:
        _print_one(described[0])


def _print_list(described: list[EventTypeInfo]) -> None:
    width = max(len(info.name) for info in described)
    for info in described:
        mark = "*" if info.name in COMMON_EVENT_TYPES else " "
        print(f"{mark} {info.name:<{width}}  {info.description}")
    print(f"\n* the most common. {OPEN_EVENT_TYPE_RULE}")
    print("`eventloom types TYPE` shows a type's payload schema and an example.")


def _print_one(info: EventTypeInfo) -> None:
    print(f"{info.name}: {info.description}")
    if info.legacy_versions:
        print(f"({info.legacy_versions} earlier payload shape(s) still readable; docs/event-types.md)")
    print("\npayload schema:")
    print(json.dumps(info.payload_schema, indent=2))
    if info.example is not None:
        print("\nexample payload:")
        print(json.dumps(info.example, indent=2))
