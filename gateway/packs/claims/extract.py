"""Deterministic extraction: the entities an observation mentions and the simple facts it states.

Pure and bounded: one left-to-right pass of a regular expression over the text, then one pass over each
sentence's tokens, so a replay extracts exactly what the first projection did and a 1 MB text takes well
under a second. At most `MAX_MENTIONS` mentions and `MAX_TRIPLES` triples are kept (the first ones).

Tokens: words (letters, inner digits and hyphens), a possessive `'s`, quoted strings (`"..."` or
`“...”`, at most `MAX_QUOTED` characters, on one line), sentence ends (`.`, `!`, `?`, `;`, a line break);
anything else (commas, digits, brackets...) breaks a pattern without ending the sentence.

Mentions, in order of first appearance, one per `model.entity_key`:
- a name: consecutive capitalised words (`Alice Smith`, at most `MAX_NAME_WORDS`), without leading
  function words (`STOP_WORDS`: "The", "She", "I", "Then"...; such a word at the start of a sentence is
  capitalised for grammar, not because it names something);
- a quoted string, as written (stripped);
- the ends of every triple below (`user`, a noun phrase).

Triples, each within one sentence, between names (a quoted string counts as a name):
- `<Name> is named|called <Name>`, `<Name>'s name is <Name>` -> `IS_NAMED`; `my name is <Name>` -> (`user`,
  `IS_NAMED`, Name);
- `<Name> is a|an <noun phrase>` -> `IS_A`, the noun phrase being the next one to `MAX_PHRASE_WORDS`
  words up to a function word or a break ("Alice is a software engineer" -> `software engineer`);
- `<Name> <1-3 lowercase words> [the|a|an] <Name>` -> the words in UPPER_SNAKE ("Alice works at Acme" ->
  (Alice, `WORKS_AT`, Acme), "lives in" -> `LIVES_IN`), unless a word is a conjunction or a negation
  ("Alice and Bob", "Alice never met Bob": no fact), or the predicate is not a valid
  `events.PREDICATE` or is one of `events.RESERVED_PREDICATES`.

`TripleExtractor` is what the pack extracts with; `DeterministicExtractor` is this module's.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Final, Literal, Protocol

import msgspec

from gateway.packs.claims.events import PREDICATE, RESERVED_PREDICATES, Triple
from gateway.packs.claims.model import entity_key

MAX_MENTIONS: Final = 256
MAX_TRIPLES: Final = 256
MAX_NAME_WORDS: Final = 8
MAX_PHRASE_WORDS: Final = 4
MAX_QUOTED: Final = 200
MAX_NAME_CHARS: Final = 512
USER: Final = "user"
"""The subject of "my name is ...": whoever wrote the observation."""
THREADED_ABOVE: Final = 100_000
"""Texts longer than this are extracted on a worker thread, so the event loop never waits on one."""

STOP_WORDS: Final = frozenset(
    """
    a an the this that these those my your his her its our their mine yours i you he she it we they me
    him us them who whom whose what which where when why how and or but nor so yet if then than because
    while although though whereas of in on at by for from to with without about after before during into
    onto over under is are was were be been am do does did has have had will would shall should can
    could may might must not no never yes ok okay hi hello hey dear please thanks thank also however
    meanwhile later now today yesterday tomorrow tonight recently still just there here some any every
    each all both either neither many much most more few several another other
    """.split()  # noqa: SIM905 (a list of 130 words is easier to read as text)
)
"""Function words: never the start of a name, and they end a noun phrase."""
_JOINING: Final = frozenset({"and", "or", "but", "nor", "yet", "so", "then", "than", "because", "while"})
_NEGATING: Final = frozenset({"not", "no", "never", "nor", "neither", "nobody", "nothing", "without"})
_ARTICLES: Final = frozenset({"a", "an", "the"})
_NAMING: Final = frozenset({"named", "called"})
_PREDICATE: Final = re.compile(PREDICATE)
_LOWER_WORD: Final = re.compile(r"[a-z]+(?:-[a-z]+)*")
_TOKENS: Final = re.compile(
    rf"(?P<quote>\"[^\"\n]{{1,{MAX_QUOTED}}}\"|“[^”\n]{{1,{MAX_QUOTED}}}”)"
    r"|(?P<word>[^\W\d_][^\W_]*(?:-[^\W_]+)*)"
    r"|(?P<poss>['\u2019]s\b)"
    r"|(?P<end>[.!?;\n])"
    r"|(?P<space>[ \t\r]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)


class Extraction(msgspec.Struct, frozen=True):
    """What a text mentions (entity names, first spelling kept) and the facts it states."""

    mentions: list[str] = msgspec.field(default_factory=list)
    triples: list[Triple] = msgspec.field(default_factory=list)


class TripleExtractor(Protocol):
    """Extracts mentions and triples from an observation's text; `name` goes into `extracted_by`."""

    @property
    def name(self) -> str: ...

    async def extract(self, text: str) -> Extraction: ...


class DeterministicExtractor:
    """This module's rules (`extract`), the same for every replay."""

    name: Final = "deterministic"

    async def extract(self, text: str) -> Extraction:
        if len(text) > THREADED_ABOVE:
            return await asyncio.to_thread(extract, text)
        return extract(text)


ItemKind = Literal["name", "word", "poss", "break"]


class _Item(msgspec.Struct, frozen=True, gc=False):
    """One unit of a sentence: a name (its text), a lowercase word (casefolded), `'s` or a break."""

    kind: ItemKind
    text: str = ""


def _is_capitalised(word: str) -> bool:
    return word[0].isupper()


def _sentences(text: str) -> Iterator[list[_Item]]:
    """Each sentence as items: consecutive capitalised words joined into names."""
    items: list[_Item] = []
    span: list[str] = []

    def close_span() -> None:
        while span and span[0].casefold() in STOP_WORDS:  # "The", "She", "Then" before a name
            items.append(_Item("word", span.pop(0).casefold()))
        if span:
            name = " ".join(span)
            items.append(_Item("name", name) if len(name) <= MAX_NAME_CHARS else _Item("break"))
            span.clear()

    for match in _TOKENS.finditer(text):
        kind = match.lastgroup
        if kind == "space":
            continue
        token = match.group()
        if kind == "word" and _is_capitalised(token):
            if len(span) == MAX_NAME_WORDS:
                close_span()
            span.append(token)
            continue
        close_span()
        if kind == "word":
            items.append(_Item("word", token.casefold()))
        elif kind == "quote":
            quoted = token[1:-1].strip()
            items.append(_Item("name", quoted) if _names_something(quoted) else _Item("break"))
        elif kind == "poss":
            items.append(_Item("poss"))
        elif kind == "end":
            if items:
                yield items
            items = []
        else:
            items.append(_Item("break"))
    close_span()
    if items:
        yield items


def _names_something(text: str) -> bool:
    if not 0 < len(text) <= MAX_NAME_CHARS:
        return False
    try:
        entity_key(text)
    except ValueError:
        return False
    return True


def _word(items: list[_Item], at: int, *words: str) -> bool:
    """`items[at:]` starts with these lowercase words."""
    if at + len(words) > len(items):
        return False
    return all(items[at + i] == _Item("word", word) for i, word in enumerate(words))


def _name(items: list[_Item], at: int) -> str | None:
    if at < len(items) and items[at].kind == "name":
        return items[at].text
    return None


def _noun_phrase(items: list[_Item], at: int) -> str | None:
    """The words from `at` up to a function word or a break (at most `MAX_PHRASE_WORDS`)."""
    words: list[str] = []
    for item in items[at : at + MAX_PHRASE_WORDS]:
        if item.kind == "name" or (item.kind == "word" and item.text not in STOP_WORDS):
            words.append(item.text)
        else:
            break
    phrase = " ".join(words)
    return phrase if words and _names_something(phrase) else None


def predicate_of(words: list[str]) -> str | None:
    """Lowercase words as an UPPER_SNAKE predicate, or None when they state no relation."""
    if not words or any(not _LOWER_WORD.fullmatch(w) or w in _JOINING or w in _NEGATING for w in words):
        return None
    predicate = "_".join(words).replace("-", "_").upper()
    if predicate in RESERVED_PREDICATES or not _PREDICATE.fullmatch(predicate):
        return None
    return predicate


def _verb_phrase(items: list[_Item], at: int) -> tuple[str, str] | None:
    """`<1-3 lowercase words> [article] <Name>` from `at`: (predicate, object name)."""
    words: list[str] = []
    for step in range(4):
        item = items[at + step] if at + step < len(items) else None
        if item is None or item.kind not in ("word", "name"):
            return None
        if item.kind == "name":
            if words and words[-1] in _ARTICLES:
                words.pop()
            predicate = predicate_of(words)
            return (predicate, item.text) if predicate is not None else None
        words.append(item.text)
    return None


def _triples_from(items: list[_Item], at: int) -> Iterator[tuple[str, str, str]]:
    """The triples that start at `items[at]` (a name, or "my")."""
    first = items[at]
    if first.kind == "word":
        named = _name(items, at + 3) if first.text == "my" and _word(items, at + 1, "name", "is") else None
        if named is not None:
            yield (USER, "IS_NAMED", named)
        return
    if first.kind != "name" or at + 1 >= len(items):
        return
    subject, after = first.text, items[at + 1]
    if after.kind == "poss":
        if _word(items, at + 2, "name", "is") and (named := _name(items, at + 4)) is not None:
            yield (subject, "IS_NAMED", named)
        return
    if after.text == "is" and after.kind == "word" and at + 2 < len(items) and items[at + 2].kind == "word":
        then = items[at + 2].text
        if then in _NAMING:
            if (named := _name(items, at + 3)) is not None:
                yield (subject, "IS_NAMED", named)
            return
        if then in ("a", "an"):
            if (kind := _noun_phrase(items, at + 3)) is not None:
                yield (subject, "IS_A", kind)
            return
    if (found := _verb_phrase(items, at + 1)) is not None:
        yield (subject, found[0], found[1])


def extract(text: str) -> Extraction:
    """The mentions and triples of `text` by the rules of this module's docstring."""
    mentions: dict[str, str] = {}
    triples: dict[tuple[str, str, str], Triple] = {}
    keys: dict[str, str] = {}  # name -> entity key: names repeat, normalising them is the costly part

    def key_of(name: str) -> str:
        key = keys.get(name)
        if key is None:
            key = keys[name] = entity_key(name)
        return key

    def mention(name: str) -> None:
        if len(mentions) < MAX_MENTIONS:
            mentions.setdefault(key_of(name), name)

    for items in _sentences(text):
        for at, item in enumerate(items):
            if item.kind == "name":
                mention(item.text)
            elif item.kind != "word" or item.text != "my":
                continue
            for subject, predicate, obj in _triples_from(items, at):
                key = (key_of(subject), predicate, key_of(obj))
                if key not in triples and len(triples) < MAX_TRIPLES:
                    triples[key] = Triple(subject=subject, predicate=predicate, object=obj)
                    mention(subject)
                    mention(obj)
    known = set(mentions)
    kept = [t for t in triples.values() if key_of(t.subject) in known and key_of(t.object) in known]
    return Extraction(mentions=list(mentions.values()), triples=kept)
