"""`--partitions 0-7,12`: which partitions a worker owns."""

from __future__ import annotations


def parse_partitions(spec: str | None, total: int) -> list[int] | None:
    """None (all partitions) for an empty spec; otherwise the sorted, validated partition numbers."""
    if spec is None or not spec.strip():
        return None
    chosen: set[int] = set()
    for part in spec.split(","):
        low_text, _, high_text = part.strip().partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if high_text else low
        except ValueError:
            raise ValueError(f"partitions: {part.strip()!r} is not a number or a range like 0-7") from None
        if not 0 <= low <= high < total:
            raise ValueError(f"partitions: {part.strip()!r} is outside 0-{total - 1}")
        chosen.update(range(low, high + 1))
    return sorted(chosen)


def consumer_name(role: str, name: str, partitions: list[int] | None) -> str:
    """Durable consumer name: one per role, plug-in and partition set, so disjoint workers never share."""
    if partitions is None:
        return f"{role}-{name}"
    return f"{role}-{name}-p{_ranges(partitions)}"


def _ranges(numbers: list[int]) -> str:
    """[0,1,2,3,7] -> "0-3_7"."""
    runs: list[str] = []
    start = previous = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if number is not None:
            start = previous = number
    return "_".join(runs)
