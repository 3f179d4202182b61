"""stub/tracebacks.py: the standard library's machinery is hidden only where the stub called
into it, so a model's own use of asyncio or concurrent.futures keeps its frames."""

from __future__ import annotations

import asyncio
import concurrent.futures

from pybackend.stub.tracebacks import format_exception


def fail() -> None:
    raise ValueError("boom")


def functions(text: str) -> list[str]:
    """The function names of the rendered frames, innermost first."""
    return [line.rsplit(": ", 1)[1] for line in text.split("At:\n", 1)[1].splitlines()]


def test_machinery_outside_the_model_is_hidden() -> None:
    """A traceback that starts in a future's result() (the stub waiting for an async
    execute) begins at the model's frames."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(fail).result()
        except ValueError as e:
            exc = e
    exc.__traceback__ = exc.__traceback__.tb_next  # drop this test's frame: as if the stub's
    assert functions(format_exception(exc)) == ["fail"]


def test_machinery_the_model_calls_keeps_its_frames() -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(fail).result()
        except ValueError as e:
            text = format_exception(e)
    assert functions(text) == [
        "fail",
        "run",  # the pool's worker
        "__get_result",
        "result",
        "test_machinery_the_model_calls_keeps_its_frames",
    ]


def test_asyncio_the_model_runs_keeps_its_frames() -> None:
    async def main() -> None:
        fail()

    try:
        asyncio.run(main())
    except ValueError as e:
        names = functions(format_exception(e))
    assert names[:2] == ["fail", "main"]
    assert names[-1] == "test_asyncio_the_model_runs_keeps_its_frames"
    assert "run_until_complete" in names
