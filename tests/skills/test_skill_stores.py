"""The skill, usage and checkpoint stores: twins and real backends behave alike; what the
sandbox sends for a checkpoint is validated and bounded."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.checkpoints import Checkpoint, CheckpointTools, KVCheckpoints
from codemode.errors import ToolError
from codemode.skills.model import Skill
from codemode.skills.store import FolderSkills, MemorySkills, SkillStore, owner_key
from codemode.skills.usage import SkillUsage
from codemode.state.store import KeyValueStore, MemoryStore
from codemode.tools import ToolCall

SKILL = Skill(
    name="dashes",
    owner="alice",
    description="Join words with dashes",
    source="def dashes(text: str) -> str:\n    return '-'.join(text.split())\n",
    tests="from skills import dashes\nassert dashes('a b') == 'a-b'\n",
    signature="dashes(text: str) -> str",
    tools=("shop.list_items",),
    fingerprints={"shop.list_items": "abc"},
    saved_at=1.5,
    session="s_x",
)


@pytest.fixture(params=["memory", "folder"])
def skills(request: pytest.FixtureRequest, tmp_path: Path) -> SkillStore:
    return MemorySkills() if request.param == "memory" else FolderSkills(tmp_path / "skills")


@pytest.fixture(params=["memory", "redis"])
def kv(request: pytest.FixtureRequest) -> Iterator[KeyValueStore]:
    if request.param == "memory":
        yield MemoryStore()
        return
    from codemode.state.redis import RedisStore

    store = RedisStore(request.getfixturevalue("redis_server").url)
    yield store
    store.close()


def test_skill_stores_round_trip_list_and_delete(skills: SkillStore) -> None:
    skills.put(SKILL)
    skills.put(SKILL.with_changes(name="other", owner="bob"))
    assert skills.get("alice", "dashes") == SKILL
    assert [s.key for s in skills.list()] == ["alice/dashes", "bob/other"]
    assert [s.key for s in skills.list("bob")] == ["bob/other"]
    assert skills.delete("alice", "dashes") and not skills.delete("alice", "dashes")
    assert skills.get("alice", "dashes") is None


def test_a_person_editing_the_folder_is_seen(tmp_path: Path) -> None:
    store = FolderSkills(tmp_path)
    store.put(SKILL)
    assert store.get("alice", "dashes") == SKILL  # cached now
    module = tmp_path / "alice" / "dashes" / "scripts" / "dashes.py"
    module.write_text("def dashes(text):\n    return text\n")
    skill_md = tmp_path / "alice" / "dashes" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("Join words", "Glue words"))
    edited = store.get("alice", "dashes")
    assert edited is not None and edited.description == "Glue words with dashes"
    assert edited.source == "def dashes(text):\n    return text\n"


def test_owner_names_are_safe_folder_names() -> None:
    assert owner_key(None) == "-"
    assert owner_key("alice") == "alice"
    assert owner_key("../etc") != "../etc" and "/" not in owner_key("../etc")


def test_usage_counts_in_both_stores(kv: KeyValueStore) -> None:
    usage = SkillUsage(kv)
    usage.imported(SKILL)
    usage.ran(SKILL, True)
    usage.ran(SKILL, False)
    counted = usage.of(SKILL)
    assert (counted.imports, counted.ok, counted.failed) == (1, 1, 1)
    assert counted.success_rate == 0.5
    usage.forget(SKILL)
    assert usage.of(SKILL).imports == 0


def test_checkpoints_in_both_stores_expire(kv: KeyValueStore) -> None:
    store = KVCheckpoints(kv)
    kept = Checkpoint("alice", 1.0, b"tar", ("a.txt",), {"x": b"pickle"})
    store.put("s_1", kept, expires_at=time.time() + 60)
    assert store.get("s_1") == kept
    store.put("s_2", kept, expires_at=time.time() - 1)
    assert store.get("s_2") is None
    store.delete("s_1")
    assert store.get("s_1") is None


def _tar(*members: tuple[str, Any]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
                tar.addfile(info)
            else:
                info.size = len(kind)
                tar.addfile(info, io.BytesIO(kind))
    return buffer.getvalue()


def _tools(max_bytes: int = 100_000) -> CheckpointTools:
    return CheckpointTools(
        KVCheckpoints(MemoryStore()),
        handle="s_1",
        owner="alice",
        max_bytes=max_bytes,
        max_files=3,
        ttl_s=60,
    )


def _put(tools: CheckpointTools, archive: bytes, variables: dict[str, bytes]) -> Any:
    call = ToolCall("_checkpoint", "put", {"archive": archive, "variables": variables})
    return tools.invoke(call, timeout_s=1)


def test_the_guests_archive_is_validated_and_bounded() -> None:
    tools = _tools()
    tools.invoke(ToolCall("_checkpoint", "keep", {"names": ["rows"]}), timeout_s=1)
    _put(tools, _tar(("notes/a.txt", b"hi")), {"rows": b"data"})
    assert tools.note == "saved 1 file(s), 1 variable(s)"
    stored = tools.store.get("s_1")
    assert stored is not None and stored.files == ("notes/a.txt",)

    for bad in (_tar(("evil", "link")), _tar(("../up.txt", b"x")), _tar(("/abs", b"x")), b"junk"):
        with pytest.raises(ToolError, match="checkpoint"):
            _put(tools, bad, {})
    with pytest.raises(ToolError, match="over its file or size limit"):
        _put(tools, _tar(*[(f"f{i}", b"x") for i in range(5)]), {})
    with pytest.raises(ToolError, match="kept names"):
        _put(tools, b"", {"secret": b"x"})
    small = _tools(max_bytes=10)
    _put(small, _tar(("a.txt", b"x" * 100)), {})
    assert small.note is not None and small.note.startswith("not saved")
    assert small.store.get("s_1") is None


def test_installs_are_kept_with_the_checkpoint_and_the_guests_word_is_checked() -> None:
    tools = _tools()
    for names in (["tinylib"], ["tinylib"], ["a", "b==1"], []):
        tools.note_installed(names)
    assert tools.packages == [("tinylib",), ("a", "b==1")] and tools.packages_changed
    _put(tools, b"", {})
    assert not tools.packages_changed, "saved with the checkpoint"
    resumed = CheckpointTools(
        tools.store, handle="s_1", owner="alice", max_bytes=100, max_files=1, ttl_s=1
    )
    fetched = resumed.invoke(ToolCall("_checkpoint", "fetch", {}), timeout_s=1)
    assert fetched["packages"] == [["tinylib"], ["a", "b==1"]]
    assert resumed.packages == [("tinylib",), ("a", "b==1")], "the next checkpoint keeps them"
    # The guest says which installs it made again: only indexes of the fetched ones count.
    claim = {"variables": [], "packages": [1, 7, "0", -1]}
    resumed.invoke(ToolCall("_checkpoint", "restored", claim), timeout_s=1)
    assert resumed.restored_packages == ["a", "b==1"]
    # An install made after the last checkpoint saved (the next one failed) is not lost.
    tools.note_installed(["late"])
    again = tools.invoke(ToolCall("_checkpoint", "fetch", {}), timeout_s=1)
    assert again["packages"] == [["tinylib"], ["a", "b==1"], ["late"]]


def test_the_working_directory_is_kept_only_as_a_folder_inside_the_workspace() -> None:
    for given, kept in (
        ("tasks/001", "tasks/001"),
        ("", ""),
        ("../etc", ""),
        ("tasks/../../x", ""),
        ("/etc", ""),
        ("a\0b", ""),
        ("x" * 2000, ""),
        (7, ""),
    ):
        tools = _tools()
        call = ToolCall("_checkpoint", "put", {"archive": b"", "variables": {}, "cwd": given})
        tools.invoke(call, timeout_s=1)
        stored = tools.store.get("s_1")
        assert stored is not None and stored.cwd == kept, given
        fetched = tools.invoke(ToolCall("_checkpoint", "fetch", {}), timeout_s=1)
        assert fetched["cwd"] == kept


def test_a_put_without_an_archive_keeps_the_stored_files() -> None:
    tools = _tools()
    archive = _tar(("a.txt", b"hi"))
    _put(tools, archive, {})
    unchanged = {"archive": None, "variables": {}, "cwd": "sub"}
    tools.invoke(ToolCall("_checkpoint", "put", unchanged), timeout_s=1)
    stored = tools.store.get("s_1")
    assert stored is not None and tools.note == "saved 1 file(s), 0 variable(s)"
    assert (stored.archive, stored.files, stored.cwd) == (archive, ("a.txt",), "sub")
    nothing_stored = _tools()
    nothing_stored.invoke(ToolCall("_checkpoint", "put", unchanged), timeout_s=1)
    assert nothing_stored.note is not None and nothing_stored.note.startswith("not saved")
    assert nothing_stored.store.get("s_1") is None


def test_another_owner_fetches_nothing() -> None:
    tools = _tools()
    tools.note_installed(["tinylib"])
    _put(tools, _tar(("a.txt", b"hi")), {})
    assert tools.invoke(ToolCall("_checkpoint", "fetch", {}), timeout_s=1)["packages"] == [
        ["tinylib"]
    ]
    thief = CheckpointTools(
        tools.store, handle="s_1", owner="mallory", max_bytes=1, max_files=1, ttl_s=1
    )
    assert thief.invoke(ToolCall("_checkpoint", "fetch", {}), timeout_s=1) == {
        "archive": b"",
        "variables": {},
        "packages": [],
        "cwd": "",
    }
    assert thief.packages == []


def test_counting_survives_a_redis_that_went_away(redis_server: Any) -> None:
    from codemode.state.redis import RedisStore

    store = RedisStore(redis_server.url)
    usage = SkillUsage(store)
    usage.imported(SKILL)
    redis_server.stop()
    try:
        usage.ran(SKILL, True)  # logged, not raised: an execution never fails on a counter
        assert usage.of(SKILL).imports == 0
    finally:
        store.close()


def test_the_approval_gate_is_a_setting() -> None:
    from codemode.errors import SkillRefusedError
    from codemode.settings.skills import SkillsSettings
    from codemode.skills.library import SkillLibrary

    store = MemorySkills()
    store.put(SKILL.with_changes(shared=True))
    usage = SkillUsage(MemoryStore())
    gated = SkillLibrary(store, usage, SkillsSettings(), list)
    with pytest.raises(SkillRefusedError, match="not approved yet"):
        gated.find("bob", "dashes")
    assert gated.visible("bob") == []
    open_library = SkillLibrary(store, usage, SkillsSettings(shared_need_approval=False), list)
    assert open_library.find("bob", "dashes") == store.get("alice", "dashes")
    assert gated.find("alice", "dashes") is not None  # the author always sees their own
