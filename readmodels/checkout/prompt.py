"""The prompt text of a checkout: sections filled best-first while the whole still fits the budget.

An item goes in with the evidence lines it cites, or not at all, so every `[n]` in the prompt has its
line in the evidence section. Items that do not fit are skipped (a shorter later one may still fit)
and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from readmodels.checkout.budget import estimate_tokens
from readmodels.retrieval.model import Citation


def citation_line(number: int, cited: Citation) -> str:
    where = ""
    if cited.path:
        lines = ""
        if cited.line_start is not None:
            end = f"-{cited.line_end}" if cited.line_end not in (None, cited.line_start) else ""
            lines = f":{cited.line_start}{end}"
        where = f" ({cited.path}{lines})"
    return f"[{number}] {cited.uri}{where}"


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)


@dataclass
class PromptBuilder:
    budget: int
    header: list[str]
    reserve: int = 0
    """Tokens kept free for what is added after the items (the guidance)."""
    sections: list[Section] = field(default_factory=list)
    evidence: list[Citation] = field(default_factory=list)
    left_out: int = 0
    _numbers: dict[tuple[str, str | None, int | None, int | None], int] = field(default_factory=dict)

    def section(self, title: str) -> Section:
        found = Section(title)
        self.sections.append(found)
        return found

    def text(
        self, sections: Sequence[Section] | None = None, evidence: Sequence[Citation] | None = None
    ) -> str:
        parts = list(self.header)
        for section in self.sections if sections is None else sections:
            if section.lines:
                parts += ["", section.title, *section.lines]
        cited = self.evidence if evidence is None else evidence
        if cited:
            parts += ["", "## Evidence (events of the signed log)"]
            parts += [citation_line(number, c) for number, c in enumerate(cited, 1)]
        return "\n".join(parts)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text())

    def try_add(
        self, section: Section, render: Callable[[str], str], citations: Sequence[Citation]
    ) -> list[int] | None:
        """Add the line `render(refs)` (refs like "[1] [2]") if it fits; its evidence numbers, or None."""
        numbers, added = self._number(citations)
        line = render(" ".join(f"[{n}]" for n in numbers))
        section.lines.append(line)
        if estimate_tokens(self.text()) + self.reserve <= self.budget:
            return numbers
        section.lines.pop()
        for key in added:
            del self._numbers[key]
        del self.evidence[len(self.evidence) - len(added) :]
        self.left_out += 1
        return None

    def try_add_note(self, section: Section, line: str) -> bool:
        """Add `line`, which cites nothing, if it fits; a note that does not is dropped, not counted as
        an item left out (it is about the items, not one of them)."""
        section.lines.append(line)
        if estimate_tokens(self.text()) + self.reserve <= self.budget:
            return True
        section.lines.pop()
        return False

    def _number(
        self, citations: Sequence[Citation]
    ) -> tuple[list[int], list[tuple[str, str | None, int | None, int | None]]]:
        numbers: list[int] = []
        added: list[tuple[str, str | None, int | None, int | None]] = []
        for cited in citations:
            key = (cited.uri, cited.path, cited.line_start, cited.line_end)
            number = self._numbers.get(key)
            if number is None:
                self.evidence.append(cited)
                number = self._numbers[key] = len(self.evidence)
                added.append(key)
            if number not in numbers:
                numbers.append(number)
        return numbers, added
