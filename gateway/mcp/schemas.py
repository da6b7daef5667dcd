"""How a tool is shown to an agent and what it accepts: strict arguments, a compact schema, a plain
description."""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel, ConfigDict


def strict_arguments(tool: Any) -> None:
    """Make `tool` refuse arguments it does not take and values of the wrong type, however deep; its
    input schema says so (`additionalProperties: false`), so a client sees it before calling."""
    loose: type[BaseModel] = tool.fn_metadata.arg_model
    config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", strict=True)
    strict: type[BaseModel] = type(
        loose.__name__, (loose,), {"model_config": config, "__module__": loose.__module__}
    )
    tool.fn_metadata.arg_model = strict
    tool.parameters = compact_schema(strict.model_json_schema(by_alias=True))
    if tool.output_schema is not None:
        tool.output_schema = compact_schema(tool.output_schema)


def plain_description(docstring: str) -> str:
    """A docstring as an LLM should read it: one line a paragraph, no indentation or wrapping."""
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n".join(" ".join(paragraph.split()) for paragraph in paragraphs if paragraph.strip())


def compact_schema(schema: Any) -> Any:
    """`schema` as an LLM reads it best, and cheapest: no generated titles, and an optional argument as
    its own type (omitting it is how to say "none"; the server still takes an explicit null)."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    compact: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in ("properties", "$defs"):
            compact[key] = {name: compact_schema(item) for name, item in value.items()}
        else:
            compact[key] = compact_schema(value)
    options = compact.get("anyOf")
    if isinstance(options, list) and compact.get("default", ...) is None:
        kept = [option for option in options if option != {"type": "null"}]
        if len(kept) == 1 and len(options) == 2:
            del compact["anyOf"], compact["default"]
            compact = {**kept[0], **compact}
    return compact
