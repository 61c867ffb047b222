"""Checksummed text frames for devices that are not Modbus (pure; no I/O).

Wire form, one frame per line: ``$TAG,field,field*HH\\r\\n`` where ``HH`` is the XOR of every byte
between the start character and ``*``, in upper-case hex. Frames are found by content (start
character, end marker, checksum), never by gaps between characters, so a USB adapter that
splits or merges reads makes no difference. A broken frame costs that frame only: the decoder
resynchronises on the next start character.
"""

from __future__ import annotations

from dataclasses import dataclass

from devices.errors import FrameDecodeError
from devices.profiles import LineFormat, Profile


@dataclass(frozen=True, slots=True)
class Frame:
    name: str  # the profile's frame name, e.g. "count"
    values: dict[str, int]


def checksum(body: bytes) -> int:
    x = 0
    for b in body:
        x ^= b
    return x


def encode_raw(fmt: LineFormat, tag: str, fields: list[str]) -> bytes:
    body = fmt.separator.join([tag, *fields]).encode("ascii")
    return (
        fmt.start.encode("ascii")
        + body
        + b"*"
        + f"{checksum(body):02X}".encode("ascii")
        + fmt.end.encode("ascii")
    )


def encode_frame(profile: Profile, name: str, values: dict[str, int]) -> bytes:
    assert profile.line is not None
    spec = profile.frames[name]
    return encode_raw(profile.line, spec.tag, [str(values[f.name]) for f in spec.fields])


class _ErrorRun:
    """Errors between two frames, kept as one: the first reason and how many there were."""

    def __init__(self, out: list[Frame | FrameDecodeError]) -> None:
        self.out = out
        self.first = ""
        self.count = 0

    def add(self, reason: str, count: int = 1) -> None:
        if self.count == 0:
            self.first = reason
        self.count += count

    def close(self) -> None:
        if self.count == 1:
            self.out.append(FrameDecodeError(self.first))
        elif self.count > 1:
            self.out.append(
                FrameDecodeError(f"{self.first} (and {self.count - 1} more frame errors)", self.count)
            )
        self.count = 0


class LineDecoder:
    """Feed it bytes as they come; it returns whole frames and one error per broken frame."""

    def __init__(self, profile: Profile) -> None:
        assert profile.line is not None
        self.profile = profile
        self.fmt = profile.line
        self._start = self.fmt.start.encode("ascii")
        self._end = self.fmt.end.encode("ascii")
        self._buf = bytearray()
        self._by_tag = {f.tag: f for f in profile.frames.values()}

    def feed(self, data: bytes) -> list[Frame | FrameDecodeError]:
        """Frames in order, and the errors among them; a run of errors with no frame between is
        one FrameDecodeError carrying the count. Linear in the bytes fed: every search is bounded
        by the longest frame, so a flood of start characters or noise costs no more than its size
        (issue 11: 1 MiB of "$" was one error and one full-buffer search per byte)."""
        self._buf += data
        out: list[Frame | FrameDecodeError] = []
        errors = _ErrorRun(out)
        # A frame is start + at most max_length + end: nothing further on can end it.
        window = 1 + self.fmt.max_length + len(self._end)
        while True:
            start = self._buf.find(self._start)
            if start < 0:
                if self._buf.strip(b"\r\n\x00 "):
                    errors.add("noise between frames discarded")
                self._buf.clear()
                errors.close()
                return out
            if start > 0:
                if self._buf[:start].strip(b"\r\n\x00 "):
                    errors.add("noise between frames discarded")
                del self._buf[:start]
            end = self._buf.find(self._end, 1, window)
            restart = self._buf.rfind(self._start, 1, end if end >= 0 else window)
            if restart >= 0:
                # Each start before the last one in reach began a frame that never ended.
                errors.add(
                    "truncated frame (new frame began before its end)",
                    self._buf.count(self._start, 0, restart),
                )
                del self._buf[:restart]
                continue
            if end < 0:
                if len(self._buf) >= window:
                    errors.add(f"frame longer than {self.fmt.max_length} bytes")
                    del self._buf[:window]
                    continue
                errors.close()
                return out
            raw = bytes(self._buf[1:end])
            del self._buf[: end + len(self._end)]
            try:
                frame = self.decode_body(raw)
            except FrameDecodeError as exc:
                errors.add(str(exc))
            else:
                errors.close()
                out.append(frame)

    def decode_body(self, raw: bytes) -> Frame:
        """Check and decode one frame without its start and end markers."""
        if len(raw) > self.fmt.max_length:
            raise FrameDecodeError(f"frame longer than {self.fmt.max_length} bytes")
        body, star, cs = raw.rpartition(b"*")
        if not star or len(cs) != 2:
            raise FrameDecodeError("frame without a two-digit checksum")
        try:
            want = int(cs.decode("ascii"), 16)
        except (UnicodeDecodeError, ValueError):
            raise FrameDecodeError("frame checksum is not hex") from None
        if checksum(body) != want:
            raise FrameDecodeError("frame checksum mismatch")
        try:
            parts = body.decode("ascii").split(self.fmt.separator)
        except UnicodeDecodeError:
            raise FrameDecodeError("frame is not ASCII") from None
        spec = self._by_tag.get(parts[0])
        if spec is None:
            raise FrameDecodeError(f"unknown frame tag {parts[0][:8]!r}")
        fields = parts[1:]
        if len(fields) != len(spec.fields):
            raise FrameDecodeError(f"{spec.name} frame has {len(fields)} fields, expected {len(spec.fields)}")
        values: dict[str, int] = {}
        for fs, text in zip(spec.fields, fields, strict=True):
            if not text.isdigit() or len(text) > 10:
                raise FrameDecodeError(f"{spec.name} frame field {fs.name} is not a number")
            v = int(text)
            if not fs.min <= v <= fs.max:
                raise FrameDecodeError(f"{spec.name} frame field {fs.name} out of range {fs.min}-{fs.max}")
            values[fs.name] = v
        return Frame(spec.name, values)
