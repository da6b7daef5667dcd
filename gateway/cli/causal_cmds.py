"""`eventloom memory causal path|explain`: how a cause led to an effect, and why an outcome happened.

Answered by the node's query service (`readmodels.retrieval.causal_reads`); `successors` and `predecessors`
live beside the other memory commands (`gateway.cli.memory_cmds`). Causal claims are proposed and
non-authoritative; each step prints the events it cites.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from gateway.cli.common import EXIT_FAILED, console, fail, print_json, run, settings_of
from gateway.cli.memory_cmds import (
    AfterOption,
    AsOfOption,
    CausalLimitOption,
    CausalSessionOption,
    JsonOption,
    NameArgument,
    TypeOption,
    _ask,
    _edge_line,
    _valid,
    after_position,
    print_lag,
)
from readmodels.retrieval.causal_chains import DEFAULT_CAUSAL_DEPTH, DEFAULT_CAUSAL_LIMIT, CausalStep
from readmodels.retrieval.causal_reads import (
    DEFAULT_PATH_LIMIT,
    CausalExplainRequest,
    CausalExplanation,
    CausalPathRequest,
    CausalPaths,
)
from readmodels.retrieval.model import MAX_DEPTH

SourceArgument = Annotated[str, typer.Argument(help="The cause: an entity's name, or a part of it")]
TargetArgument = Annotated[str, typer.Argument(help="The effect: an entity's name, or a part of it")]
PathDepthOption = Annotated[int, typer.Option("--depth", help="Longest path, in edges (1-5)")]
ExplainDepthOption = Annotated[int, typer.Option("--depth", help="Hops of causes to follow (1-5)")]
PathLimitOption = Annotated[int, typer.Option("--limit", help="Most paths to show (1-20)")]


def register(causal_app: typer.Typer) -> None:
    causal_app.command(
        "path", help="How SOURCE led to TARGET: the shortest causal paths between them, each edge cited."
    )(causal_path)
    causal_app.command(
        "explain",
        help="Why NAME happened: the outcomes it names or that concern it, their causal predecessors hop by "
        "hop, and the recorded explanations, each cited.",
    )(causal_explain)


def causal_path(
    ctx: typer.Context,
    source: SourceArgument,
    target: TargetArgument,
    session: CausalSessionOption,
    depth: PathDepthOption = MAX_DEPTH,
    as_of: AsOfOption = None,
    limit: PathLimitOption = DEFAULT_PATH_LIMIT,
    after: AfterOption = None,
    as_json: JsonOption = False,
) -> None:
    request = _valid(
        lambda: CausalPathRequest(
            session=session,
            source=source,
            target=target,
            depth=depth,
            as_of=as_of,
            limit=limit,
            after=after_position(after),
        )
    )
    found = run(_ask(settings_of(ctx), lambda memory: memory.causal_path(request)))
    if as_json:
        print_json(found)
        if not found.source_entities or not found.target_entities:
            raise typer.Exit(EXIT_FAILED)
        return
    print_lag(found.consistency)
    _print_paths(found)


def _print_paths(found: CausalPaths) -> None:
    for end, entities in (("source", found.source_entities), ("target", found.target_entities)):
        if not entities:
            close = found.suggestions.get(end, [])
            hint = f"; did you mean: {', '.join(repr(s) for s in close)}" if close else ""
            name = found.source if end == "source" else found.target
            fail(f"no entity named {escape(repr(name))} in session {found.session}{escape(hint)}")
    for asked, resolved in ((found.source, found.resolved_source), (found.target, found.resolved_target)):
        if resolved is not None:
            console.print(f"{asked!r} matched {resolved!r}", highlight=False)
    for number, path in enumerate(found.paths, 1):
        print(f"path {number}:")
        _print_steps(path.steps, "effect")
    more = "; more paths than --limit (the first shown)" if found.truncated else ""
    console.print(f"{len(found.paths)} causal path(s), not authoritative{more}", highlight=False)


def causal_explain(
    ctx: typer.Context,
    name: NameArgument,
    session: CausalSessionOption,
    entity_type: TypeOption = None,
    depth: ExplainDepthOption = DEFAULT_CAUSAL_DEPTH,
    as_of: AsOfOption = None,
    limit: CausalLimitOption = DEFAULT_CAUSAL_LIMIT,
    after: AfterOption = None,
    as_json: JsonOption = False,
) -> None:
    request = _valid(
        lambda: CausalExplainRequest(
            session=session,
            name=name,
            entity_type=entity_type,
            depth=depth,
            as_of=as_of,
            limit=limit,
            after=after_position(after),
        )
    )
    why = run(_ask(settings_of(ctx), lambda memory: memory.causal_explain(request)))
    if as_json:
        print_json(why)
        if not why.start:
            raise typer.Exit(EXIT_FAILED)
        return
    print_lag(why.consistency)
    _print_explanation(why)


def _print_explanation(why: CausalExplanation) -> None:
    if not why.start:
        hint = f"; did you mean: {', '.join(repr(s) for s in why.suggestions)}" if why.suggestions else ""
        fail(f"no entity named {escape(repr(why.name))} in session {why.session}{escape(hint)}")
    if why.resolved_name is not None:
        console.print(f"{why.name!r} matched {why.resolved_name!r}", highlight=False)
    outcomes = ", ".join(o.name for o in why.outcomes) or "none (no outcome is, or concerns, it)"
    print(f"outcomes explained: {outcomes}")
    _print_steps(why.steps, "cause")
    for explanation in why.explanations:
        said = explanation.explanation or "-"
        print(f"explained: {explanation.outcome} ({explanation.taxonomy or '-'}): {said}")
        for cited in explanation.citations:
            print(f"   cites {cited.uri}")
    more = "; more edges than --limit at some hop" if why.truncated else ""
    console.print(
        f"{len(why.steps)} causal step(s), {len(why.explanations)} explanation(s), not authoritative{more}",
        highlight=False,
    )


def _print_steps(steps: list[CausalStep], reached: str) -> None:
    for step in steps:
        entity = step.effect if reached == "effect" else step.cause
        indent = "  " * step.depth
        summary = f": {entity.summary}" if entity.summary else ""
        print(f"{indent}{step.depth}. {entity.name} ({entity.entity_type}){summary}")
        print(f"{indent}   {_edge_line(step)}")
        for cited in step.citations:
            print(f"{indent}   cites {cited.uri}")
