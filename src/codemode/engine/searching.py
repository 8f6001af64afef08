"""The engine's search: the index over the catalog (built in the background, answered
lexically meanwhile), the rendered answer, and the owner's saved skills below the tools."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.engine.progress import Progress, wait_reporting
from codemode.engine.views import CatalogViews
from codemode.search.render import DEFAULT_HEAD

if TYPE_CHECKING:
    from codemode.search.base import SearchIndex
    from codemode.search.owner_usage import OwnerUsage
    from codemode.skills.runtime import SkillsRuntime

__all__ = ["EngineSearch", "SearchAnswer"]


@dataclass(frozen=True)
class SearchAnswer:
    text: str
    hits: list[dict[str, Any]]
    # The further candidates the text names after ``hits`` (Python names, best first).
    more: list[str] = field(default_factory=list)
    # True when the full index was still being built and a keyword index answered.
    lexical_only: bool = False


class EngineSearch:
    """The engine's search: owns the index (and the lexical one that answers while it is
    built); reads the catalog, its views and the saved skills it is given."""

    def __init__(
        self,
        config: CodemodeConfig,
        catalog: Catalog,
        views: Callable[[], Awaitable[CatalogViews]],
        views_lock: threading.Lock,
        skills: Callable[[], SkillsRuntime | None],
        *,
        semantic: bool | None,
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.views = views
        self._views_lock = views_lock  # the engine's: the catalog's views and this index agree
        self._skills = skills
        self.semantic = semantic
        self._index: SearchIndex | None = None
        self._lexical: SearchIndex | None = None
        self._index_job: asyncio.Task[SearchIndex] | None = None
        # The build's latest (stage, percent), and who else hears it (``serve`` prints it).
        self._index_stage: tuple[str, float] = ("starting", 0.0)
        self.index_progress: Callable[[str, float], None] | None = None
        # Learning from use, per owner ([gateway] learn_from_use).
        self.usage: OwnerUsage | None = None
        if config.gateway.learn_from_use:
            from codemode.search.owner_usage import OwnerUsage

            self.usage = OwnerUsage()

    def learn(self, owner: str | None, tool_calls: dict[str, Any]) -> None:
        """An execution of ``owner`` finished with these call counts (its result's
        ``tool_calls``): the tools it called count as uses of its recent searches."""
        by_tool = tool_calls.get("by_tool")
        if self.usage is not None and by_tool:
            self.usage.executed(owner, by_tool)

    def forget_index(self) -> None:
        """The catalog changed (called under the views lock): build again when asked."""
        self._index = self._lexical = None

    def _search_index(self) -> SearchIndex:
        with self._views_lock:
            specs, version = self.catalog.specs(), self.catalog.version
        from codemode.search.semantic import build_index

        def take(stage: SearchIndex) -> None:
            with self._views_lock:
                if self.catalog.version == version:
                    self._index = stage

        # Built outside the lock (it may take minutes): searches meanwhile answer lexically,
        # then from each stage of a staged build as it is ready (the prose view first).
        index = build_index(
            specs, semantic=self.semantic, progress=self.note_index_stage, on_stage=take
        )
        take(index)
        return index

    def note_index_stage(self, stage: str, percent: float) -> None:
        """Where the index build is (called from its thread)."""
        self._index_stage = (stage, percent)
        if self.index_progress is not None:
            self.index_progress(stage, percent)

    def _lexical_index(self) -> SearchIndex:
        with self._views_lock:
            if self._lexical is None:
                from codemode.search.semantic import build_index

                self._lexical = build_index(self.catalog.specs(), semantic=False)
            return self._lexical

    def build_search_index(self) -> asyncio.Task[SearchIndex]:
        """Start building the search index in the background (once; again after the catalog
        changed). Searches that arrive meanwhile answer lexically at once and say so."""
        job = self._index_job
        if job is None or (job.done() and self._index is None):
            job = self._index_job = asyncio.create_task(_in_daemon_thread(self._search_index))
        return job

    async def search(
        self,
        query: str,
        *,
        detail: str = "summary",
        limit: int = DEFAULT_HEAD,
        part: int = 1,
        owner: str | None = None,
        progress: Progress | None = None,
    ) -> SearchAnswer:
        """Tools for ``query``, and below them the owner's saved skills that match."""
        from codemode.search.render import (
            answer_head,
            answer_size,
            check_detail,
            check_part,
            render_answer,
        )
        from codemode.skills.runtime import render_skill_hits

        level = check_detail(detail)
        part = check_part(part)
        limit = max(1, min(int(limit), 50))
        views = await self.views()
        index = self._index
        note = ""
        if index is None:  # an empty index is falsy: test for None
            job = self._index_job
            if job is not None and not job.done():
                index = await anyio.to_thread.run_sync(self._lexical_index)
                note = (
                    "note: the search index is still being built, so these matches are "
                    "lexical (keywords) only; search again later for better ones.\n"
                )
            else:
                index = await self._wait_for_index(progress)
        hits = index.search(query, answer_size(query, level, limit))
        if self.usage is not None:
            hits = self.usage.rerank(owner, query, hits)
            self.usage.searched(owner, query, hits)
        head = answer_head(query, hits, limit)
        text = note + render_answer(
            hits, level, source=views.stubs.tool_source, head=head, part=part
        )
        found = [hit.to_json() for hit in hits[:head]]
        more = [hit.python_name for hit in hits[head:]]
        saved = self._skills()
        if saved is not None:
            skills = await anyio.to_thread.run_sync(saved.search, owner, query)
            text += render_skill_hits(skills)
            found += [hit.to_json() for hit in skills]
        return SearchAnswer(text, found, more, lexical_only=bool(note))

    async def _wait_for_index(self, progress: Progress | None) -> SearchIndex:
        from codemode.search.progress import overall_percent

        job = self.build_search_index()
        reported = [0.0]

        def describe(elapsed: float) -> tuple[float, float | None, str]:
            stage, percent = self._index_stage
            # MCP progress must grow with each report, and stay below the total until done.
            value = min(max(overall_percent(stage, percent), reported[0] + 0.01), 99.99)
            reported[0] = value
            return (
                round(value, 2),
                100.0,
                f"building the search index: {stage} {percent:.0f}% ({elapsed:.0f} s)",
            )

        interval = self.config.gateway.progress_interval_s
        await wait_reporting([job], progress, interval, describe)
        return job.result()


async def _in_daemon_thread(build: Callable[[], SearchIndex]) -> SearchIndex:
    """``build()`` in a daemon thread; cancelling the wait abandons it. A build may take
    minutes: a worker thread of anyio's (or of an executor) would keep a gateway whose client
    is gone alive until it ended, since the interpreter waits for those at exit."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[SearchIndex] = loop.create_future()

    def settle(result: SearchIndex | None, error: BaseException | None) -> None:
        if done.done():
            return  # abandoned
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        result, error = None, None
        try:
            result = build()
        except BaseException as failed:  # noqa: BLE001 - handed to the waiting task
            error = failed
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="codemode-index", daemon=True).start()
    return await done
