"""What a read-only graph query may do, decided on the engine's own plan of the statement.

Operator Cypher is planned with `EXPLAIN` (which parses and plans, and executes nothing) and every operator of
the plan must be on an allowlist of reads; table functions and procedures must be on their own allowlists. A
word list over the text could be fooled by case, comments, escapes or look-alike letters; the plan cannot,
because it is what the engine would run. Anything unknown is refused: a new kind of read shows up as a clear
refusal naming its operator, never as a new way to touch a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from readmodels.graph.protocol import ReadOnlyQueryError

LADYBUG_READ_OPERATORS: Final = frozenset(
    {
        "AGGREGATE",
        "AGGREGATE_FINALIZE",
        "AGGREGATE_SCAN",
        "COUNT_REL_TABLE",
        "CROSS_PRODUCT",
        "DUMMY_SINK",
        "EMPTY_RESULT",
        "FILTER",
        "FLATTEN",
        "HASH_JOIN_BUILD",
        "HASH_JOIN_PROBE",
        "INTERSECT",
        "INTERSECT_BUILD",
        "LIMIT",
        "MULTIPLICITY_REDUCER",
        "ORDER_BY",
        "ORDER_BY_MERGE",
        "ORDER_BY_SCAN",
        "PATH_PROPERTY_PROBE",
        "PRIMARY_KEY_SCAN_NODE_TABLE",
        "PROJECTION",
        "QUERY_PRIMARY_KEY_LOOKUP",
        "RECURSIVE_EXTEND",
        "RESULT_COLLECTOR",
        "SCAN_NODE_TABLE",
        "SCAN_REL_TABLE",
        "SEMI_MASKER",
        "SKIP",
        "TABLE_FUNCTION_CALL",  # only with a function of LADYBUG_READ_FUNCTIONS
        "TOP_K",
        "TOP_K_SCAN",
        "UNION_ALL_SCAN",
        "UNWIND",
    }
)
LADYBUG_READ_FUNCTIONS: Final = frozenset(
    {
        "READ_FTABLE",  # the engine's own scan of an intermediate result (RETURN 1, UNWIND, subqueries)
        "SHOW_TABLES",
        "TABLE_INFO",
        "SHOW_CONNECTION",
        "DB_VERSION",
        "SHOW_FUNCTIONS",
    }
)
_LADYBUG_OPERATOR: Final = re.compile(r"(?<![A-Za-z0-9_.'\"`])([A-Z][A-Z0-9_]+)\[(\d+)\]")
"""Loose on purpose: statement text that looks like an operator can only add refusals, never hide one."""
_LADYBUG_FUNCTION: Final = re.compile(r"Function: ([A-Za-z0-9_]+)")

NEO4J_READ_OPERATORS: Final = frozenset(
    {
        "AllNodesScan",
        "AntiConditionalApply",
        "AntiSemiApply",
        "Apply",
        "Argument",
        "AssertSameNode",
        "CacheProperties",
        "CartesianProduct",
        "ConditionalApply",
        "DirectedAllRelationshipsScan",
        "DirectedRelationshipByElementIdSeek",
        "DirectedRelationshipByIdSeek",
        "DirectedRelationshipIndexContainsScan",
        "DirectedRelationshipIndexEndsWithScan",
        "DirectedRelationshipIndexScan",
        "DirectedRelationshipIndexSeek",
        "DirectedRelationshipIndexSeekByRange",
        "DirectedRelationshipTypeScan",
        "DirectedUnionRelationshipTypesScan",
        "Distinct",
        "EagerAggregation",
        "EmptyResult",
        "EmptyRow",
        "Expand",
        "Filter",
        "Limit",
        "LetAntiSemiApply",
        "LetSelectOrAntiSemiApply",
        "LetSelectOrSemiApply",
        "LetSemiApply",
        "NodeByElementIdSeek",
        "NodeByIdSeek",
        "NodeByLabelScan",
        "NodeCountFromCountStore",
        "NodeHashJoin",
        "NodeIndexContainsScan",
        "NodeIndexEndsWithScan",
        "NodeIndexScan",
        "NodeIndexSeek",
        "NodeIndexSeekByRange",
        "NodeLeftOuterHashJoin",
        "NodeRightOuterHashJoin",
        "NodeUniqueIndexSeek",
        "NodeUniqueIndexSeekByRange",
        "Optional",
        "OptionalExpand",
        "OrderedAggregation",
        "OrderedDistinct",
        "OrderedUnion",
        "PartialSort",
        "PartialTop",
        "ProcedureCall",  # only with a procedure of NEO4J_READ_PROCEDURES
        "ProduceResults",
        "ProjectEndpoints",
        "Projection",
        "RelationshipCountFromCountStore",
        "RollUpApply",
        "SelectOrAntiSemiApply",
        "SelectOrSemiApply",
        "SemiApply",
        "ShortestPath",
        "ShowConstraints",
        "ShowIndexes",
        "Skip",
        "Sort",
        "StatefulShortestPath",
        "Top",
        "TriadicBuild",
        "TriadicFilter",
        "TriadicSelection",
        "UndirectedAllRelationshipsScan",
        "UndirectedRelationshipByElementIdSeek",
        "UndirectedRelationshipByIdSeek",
        "UndirectedRelationshipIndexContainsScan",
        "UndirectedRelationshipIndexEndsWithScan",
        "UndirectedRelationshipIndexScan",
        "UndirectedRelationshipIndexSeek",
        "UndirectedRelationshipIndexSeekByRange",
        "UndirectedRelationshipTypeScan",
        "UndirectedUnionRelationshipTypesScan",
        "Union",
        "UnionNodeByLabelsScan",
        "Unwind",
        "ValueHashJoin",
        "VarLengthExpand",
    }
)
NEO4J_READ_PROCEDURES: Final = frozenset(
    {
        "db.labels",
        "db.relationshipTypes",
        "db.propertyKeys",
        "db.schema.nodeTypeProperties",
        "db.schema.relTypeProperties",
        "db.schema.visualization",
        "db.index.fulltext.queryNodes",
        "db.index.fulltext.queryRelationships",
        "db.index.vector.queryNodes",
    }
)
_NEO4J_PROCEDURE: Final = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\(")


def refuse_ladybug_plan(plans: list[str]) -> None:
    """`ReadOnlyQueryError` unless the `EXPLAIN` output of one statement shows reads only."""
    if len(plans) != 1:
        raise ReadOnlyQueryError("one statement per query: graph queries are read-only")
    operators = _LADYBUG_OPERATOR.findall(plans[0])
    numbers = {int(number) for _, number in operators}
    if not numbers or numbers != set(range(max(numbers) + 1)):
        # operators are numbered 0..n-1: a gap means part of the plan was not shown, so it was not checked
        raise ReadOnlyQueryError("the statement's plan could not be read whole: graph queries are read-only")
    for operator, _ in operators:
        if operator not in LADYBUG_READ_OPERATORS:
            raise ReadOnlyQueryError(f"graph queries are read-only; refused: {operator} is not a read")
    for function in _LADYBUG_FUNCTION.findall(plans[0]):
        if function.upper() not in LADYBUG_READ_FUNCTIONS:
            raise ReadOnlyQueryError(
                f"graph queries are read-only; refused: table function {function} may read outside the graph"
            )


def refuse_neo4j_plan(plan: Mapping[str, Any] | None) -> None:
    """`ReadOnlyQueryError` unless the `EXPLAIN` plan (the driver's `ResultSummary.plan`) shows reads only."""
    if not plan:
        raise ReadOnlyQueryError("the statement has no plan of reads: graph queries are read-only")
    for operator in _neo4j_operators(plan):
        name = str(operator.get("operatorType", "")).split("@", 1)[0].split("(", 1)[0]
        if name not in NEO4J_READ_OPERATORS:
            refused = name or "an operator"
            raise ReadOnlyQueryError(f"graph queries are read-only; refused: {refused} is not a read")
        if name == "ProcedureCall":
            details = str(operator.get("args", {}).get("Details", ""))
            match = _NEO4J_PROCEDURE.match(details)
            procedure = match.group(1) if match else details[:80]
            if procedure not in NEO4J_READ_PROCEDURES:
                raise ReadOnlyQueryError(
                    f"graph queries are read-only; refused: the procedure {procedure} is not on the read list"
                )


def _neo4j_operators(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield plan
    for child in plan.get("children", ()):
        yield from _neo4j_operators(child)
