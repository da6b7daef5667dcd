"""The claims pack: observations (what was seen), claims (what an agent concluded, with confidence and
basis), contradictions between claims and the resolutions that settle them, built on the public plug-in
API only.

`events` holds its event types, `model` what its read model writes, `reads` what it answers. See
docs/claims.md.
"""

from __future__ import annotations

__all__: list[str] = []
