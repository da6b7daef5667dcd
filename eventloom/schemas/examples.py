# ruff: noqa: E501  (example text is kept verbatim, as documented)
"""One example payload of each built-in event type, for agents (`describe_event_types`)."""

from __future__ import annotations

from typing import Any, Final

BUILTIN_EXAMPLES: Final[dict[str, dict[str, Any]]] = {
    "session.started": {
        "agent": "claude-code",
        "goal": "Make the ledger mirror survive a crash mid-write",
        "metadata": {"model": "claude-sonnet-4", "repo": "eventloom", "branch": "fix/torn-line"},
        "tags": ["ledger", "durability"],
    },
    "session.ended": {
        "reason": "completed",
        "summary": "Torn last lines are now detected and truncated on start; covered by a crash test.",
    },
    "goal.created": {
        "goal_id": "goal-durable-ledger",
        "title": "The JSONL ledger never loses an acknowledged event",
        "description": "Crash at any point during a write; on restart the ledger verifies and matches the stream.",
        "tags": ["durability"],
    },
    "task.proposed": {
        "task_id": "task-17",
        "title": "Repair a torn last line when the ledger mirror starts",
        "description": "Detect a partial final line, truncate it, and re-fetch the event from the stream.",
        "goal_id": "goal-durable-ledger",
        "depends_on": ["task-12"],
        "tags": ["ledger"],
    },
    "task.claimed": {"task_id": "task-17", "assignee": "claude-code"},
    "task.completed": {
        "task_id": "task-17",
        "summary": "Mirror truncates a torn tail and re-reads from the stream; crash test added.",
        "decision": "Truncate and re-fetch rather than refuse to start",
        "decision_event_seq": 42,
        "decision_event_hash": "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
    },
    "decision.made": {
        "decision_id": "dec-9",
        "title": "Truncate and re-fetch rather than refuse to start",
        "rationale": "The stream still holds every acknowledged event, so the ledger can always be repaired from it.",
        "alternatives": ["Refuse to start until an operator intervenes", "Keep the torn line and skip it"],
        "tags": ["ledger"],
        "task_id": "task-17",
        "about": [{"name": "ledger mirror", "entity_type": "component"}],
    },
    "issue.diagnosed": {
        "issue_id": "issue-4",
        "summary": "Ledger verification fails after a kill -9 during a batch write",
        "cause": "The last line is written without fsync, so a crash can leave half a JSON object.",
        "severity": "high",
        "tags": ["ledger", "crash"],
        "taskId": "task-17",
    },
    "verification.recorded": {
        "subject": "tests/test_ledger_crash.py",
        "passed": True,
        "details": "12 passed in 4.1s; 200 random kill points, ledger verified every time.",
        "method": "pytest",
        "task_id": "task-17",
    },
    "handoff.created": {
        "from_actor": "claude-code",
        "to_actor": "codex",
        "summary": "Crash repair is in and tested; parity check between stream and ledger is still slow.",
        "open_tasks": ["task-18", "task-21"],
    },
    "user.preference_changed": {
        "key": "code_style.line_length",
        "value": 110,
        "previous": 88,
        "scope": "repo:eventloom",
    },
    "hook.checkpoint": {
        "name": "before-stop",
        "state": {"open_files": ["eventloom/ledger/mirror.py"], "todo": ["rerun crash test"], "turn": 37},
        "taskId": "task-17",
    },
    "command.completed": {
        "command": "pytest tests/test_ledger_crash.py -q",
        "exit_code": 1,
        "output": "FAILED tests/test_ledger_crash.py::test_torn_tail - JSONDecodeError\n1 failed, 11 passed in 3.9s",
        "duration_ms": 3912.5,
        "cwd": "/home/dev/eventloom",
        "task_id": "task-17",
    },
    "file.edit.applied": {
        "path": "eventloom/ledger/mirror.py",
        "change_kind": "modify",
        "diff": '@@ -88,3 +88,6 @@\n-        lines = data.splitlines()\n+        lines = data.splitlines()\n+        if data and not data.endswith(b"\\n"):\n+            lines = lines[:-1]\n',
        "line_start": 88,
        "line_end": 93,
        "checksum": "sha256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d",
        "taskId": "task-17",
    },
    "tool.call.completed": {
        "tool": "Edit",
        "ok": False,
        "arguments": ["file_path", "old_string", "new_string"],
        "status": "error",
        "duration_ms": 12,
        "error": "old_string not found in file",
        "taskId": "task-17",
    },
    "access.refused": {
        "status": 401,
        "reason": "wrong_token",
        "source": "203.0.113.7",
        "count": 3,
        "requests": ["POST /mcp", "GET /v1/sessions"],
        "since": "2025-05-01T09:30:00.000000Z",
        "window_s": 60.0,
        "attempts": ["3f79bb7b"],
    },
    "transcript.turn": {
        "role": "user",
        "text": "Please keep lines under 110 characters from now on.",
        "turn_id": "t-0037",
        "dia_id": "D1:3",
        "speaker": "Caroline",
    },
    "document.indexed": {
        "path": "docs/operations.md",
        "title": "Operations",
        "content": "# Operations\n\nBack up the data directory daily.\nKeys live in <data>/keys with mode 0600.\n",
        "checksum": "sha256:2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6",
        "line_start": 1,
        "line_end": 4,
        "media_type": "text/markdown",
        "chunks": [
            {"text": "# Operations", "line_start": 1, "line_end": 1},
            {
                "text": "Back up the data directory daily.\nKeys live in <data>/keys with mode 0600.",
                "line_start": 3,
                "line_end": 4,
            },
        ],
        "tags": ["ops"],
    },
    "code.file.indexed": {
        "path": "eventloom/ledger/mirror.py",
        "language": "python",
        "checksum": "sha256:18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4",
        "line_count": 214,
    },
    "code.symbol.indexed": {
        "path": "eventloom/ledger/mirror.py",
        "symbol": "LedgerMirror.repair_tail",
        "kind": "method",
        "line_start": 80,
        "line_end": 112,
        "signature": "def repair_tail(self, path: Path) -> int",
        "docstring": "Truncate a torn last line; return how many bytes were dropped.",
        "language": "python",
    },
    "memory.fact.asserted": {
        "entities": [
            {
                "name": "ledger mirror",
                "entity_type": "component",
                "summary": "Writes verified events to JSONL.",
                "properties": {"module": "eventloom.ledger.mirror"},
            },
            {"name": "NATS JetStream", "entity_type": "service", "properties": {}},
        ],
        "relations": [
            {"source": "ledger mirror", "target": "NATS JetStream", "relation_type": "consumes_from"}
        ],
        "valid_from": "2025-05-01T09:30:00Z",
        "source_thread": "t-0037",
    },
    "memory.invalidated": {
        "relation": {"source": "ledger mirror", "target": "NATS JetStream", "relation_type": "consumes_from"},
        "invalid_at": "2025-06-12T14:05:00Z",
        "reason": "The mirror now reads from the ledger bus adapter instead.",
    },
    "consolidation.candidate.created": {
        "candidate_id": "cand-claim-5f0c",
        "candidate_type": "claim",
        "title": "auth-service depends_on postgres",
        "summary": "Asserted 3 times in 2 sessions: auth-service depends_on postgres.",
        "source_events": [
            {
                "session": "s1",
                "seq": 12,
                "hash": "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
            },
            {
                "session": "s2",
                "seq": 4,
                "hash": "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
            },
        ],
        "confidence": 0.9,
        "method": "claim_repeated_v1",
        "purpose": "One cited fact instead of three repeated assertions.",
        "about": [{"name": "auth-service", "entity_type": "service"}],
        "relations": [{"source": "auth-service", "target": "postgres", "relation_type": "depends_on"}],
        "summary_by": "extractive",
    },
    "consolidation.candidate.reviewed": {
        "candidate_id": "cand-claim-5f0c",
        "decision": "accepted",
        "reviewer": "alice",
        "rationale": "Checked the deployment manifest: yes.",
        "candidate_event": {
            "session": "s2",
            "seq": 9,
            "hash": "18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4",
        },
    },
    "consolidation.candidate.promoted": {
        "candidate_id": "cand-claim-5f0c",
        "candidate_type": "claim",
        "title": "auth-service depends_on postgres",
        "summary": "Asserted 3 times in 2 sessions: auth-service depends_on postgres.",
        "source_events": [
            {
                "session": "s1",
                "seq": 12,
                "hash": "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
            }
        ],
        "candidate_event": {
            "session": "s2",
            "seq": 9,
            "hash": "18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4",
        },
        "review_event": {
            "session": "s2",
            "seq": 10,
            "hash": "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
        },
        "promoted_by": "alice",
        "about": [{"name": "auth-service", "entity_type": "service"}],
    },
    "consolidation.promotion.retracted": {
        "candidate_id": "cand-claim-5f0c",
        "reason": "postgres was replaced by cockroach in May.",
        "retracted_by": "alice",
    },
    "inference.edge.generated": {
        "edge_id": "inf-co-7",
        "source": "ledger mirror",
        "target": "issue-4",
        "relation_type": "affected_by",
        "confidence": 0.74,
        "method": "co_occurrence",
        "source_event_seq": 31,
        "source_event_hash": "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
        "evidence": [
            {
                "event_seq": 31,
                "event_hash": "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
                "quote": "Ledger verification fails after a kill -9 during a batch write",
            }
        ],
    },
    "inference.edge.contradicted": {
        "edge_id": "inf-co-7",
        "reason": "The crash was in the stream consumer, not the mirror's write path.",
        "confidence": 0.8,
        "evidence": [
            {
                "citation": "eventloom://s1/events/57#2e7d2c03a950",
                "quote": "traceback ends in consumer.fetch()",
            }
        ],
    },
    "inference.edge.retracted": {
        "source": "ledger mirror",
        "target": "issue-4",
        "relation_type": "affected_by",
        "reason": "Contradicted by the crash traceback; co-occurrence was coincidental.",
        "retracted_by_event_hash": "2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6",
    },
    "causal.edge.generated": {
        "cause": "file.edit.applied eventloom/ledger/mirror.py (truncate torn tail)",
        "effect": "pytest tests/test_ledger_crash.py passes",
        "taxonomy": "fixed",
        "relation_type": "causal_fixed",
        "confidence": 0.81,
        "method": "command_failure_then_fix",
        "review_status": "proposed",
        "authority_status": "non_authoritative",
        "source_event_seq": 64,
        "source_event_hash": "18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4",
        "evidence": [
            {
                "event_seq": 58,
                "event_hash": "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
            },
            {
                "event_seq": 64,
                "event_hash": "18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4",
                "quote": "12 passed in 4.1s",
            },
        ],
        "cause_entity": {"name": "dec-9", "entity_type": "decision"},
    },
    "outcome.explained": {
        "outcome": "Ledger verification failed after the crash test",
        "explanation": "The last line was written without fsync, so the kill left half a JSON object in the file.",
        "taxonomy": "caused",
        "cause": "Unsynced final write in the ledger mirror",
        "cause_event_seq": 31,
        "cause_event_hash": "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
        "confidence": 0.9,
        "evidence": [{"citation": "eventloom://s1/events/31#3f79bb7b435b"}],
        "about": [{"name": "ledger mirror", "entity_type": "component"}],
    },
}
"""One valid payload per type: the first example of its section in docs/event-types.md (a test keeps the
two equal)."""
