"""The runner's output callback: every byte of both streams; a failing callback is dropped.

That output arrives while the code runs is shown in tests/engine/test_output_stream.py.
"""

from __future__ import annotations

from codemode.sandbox.session import SandboxSession


def test_the_callback_sees_every_byte_of_both_streams(session: SandboxSession):
    chunks: list[tuple[str, bytes]] = []
    code = "import sys\nfor i in range(3):\n    print(i)\n    print(-i, file=sys.stderr)\n"
    result = session.execute(code, on_output=lambda stream, data: chunks.append((stream, data)))
    assert result.status == "ok"
    stdout = b"".join(data for stream, data in chunks if stream == "stdout")
    stderr = b"".join(data for stream, data in chunks if stream == "stderr")
    assert (stdout, stderr) == (b"0\n1\n2\n", b"0\n-1\n-2\n")


def test_a_failing_callback_is_dropped_and_the_execution_goes_on(session: SandboxSession):
    calls: list[bytes] = []

    def broken(stream: str, data: bytes) -> None:
        calls.append(data)
        raise BrokenPipeError("the reader went away")

    result = session.execute("print('a')\nprint('b')", on_output=broken)
    assert (result.status, result.stdout) == ("ok", "a\nb\n")
    assert len(calls) == 1  # called once, then no more
    assert calls[0].startswith(b"a\n")


def test_the_in_process_twin_passes_printed_text_on_too():
    from codemode.sandbox.inprocess import InProcessSandboxes

    chunks: list[tuple[str, bytes]] = []
    provider = InProcessSandboxes()
    try:
        sandbox = provider.open("twin")
        result = sandbox.execute("print('a', 1)", on_output=lambda s, d: chunks.append((s, d)))
    finally:
        provider.close()
    assert result.stdout == "a 1\n"
    assert b"".join(data for _, data in chunks) == b"a 1\n"
    assert {stream for stream, _ in chunks} == {"stdout"}
