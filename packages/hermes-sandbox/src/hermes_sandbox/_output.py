"""Output capture with a byte cap that keeps the head and the tail of a stream."""

from __future__ import annotations


class CappedOutput:
    """Collects bytes, keeping at most ``limit`` of them: the first half and the last half.

    What was cut is replaced by a one-line notice when rendered, so the reader knows.
    """

    def __init__(self, limit: int) -> None:
        if limit < 2:
            raise ValueError("output limit must be at least 2 bytes")
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            excess = len(self._tail) - self._tail_limit
            if excess > 0:
                del self._tail[:excess]

    @property
    def truncated(self) -> bool:
        return self.total > len(self._head) + len(self._tail)

    def render(self) -> str:
        """The kept bytes as text (invalid UTF-8 replaced), with a notice where bytes were cut."""
        if not self.truncated:
            return (bytes(self._head) + bytes(self._tail)).decode("utf-8", "replace")
        omitted = self.total - len(self._head) - len(self._tail)
        return (
            bytes(self._head).decode("utf-8", "replace")
            + f"\n\n[... output truncated: {omitted} bytes omitted of {self.total} ...]\n\n"
            + bytes(self._tail).decode("utf-8", "replace")
        )
