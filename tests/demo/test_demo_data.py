"""Demo sample data: deterministic, the right size, realistic enough, safe to generate at once."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import toktok

import codemode.demo
from codemode.demo import data
from codemode.demo.documents import MEETING_DOCUMENT_ID, generate_documents
from codemode.demo.leads import ACME_LEAD_ID, STAGES, generate_leads
from codemode.demo.transcript import meeting_transcript
from codemode.errors import UsageError


@pytest.fixture(scope="module")
def transcript() -> str:
    return meeting_transcript(
        data.DEFAULT_SEED, [x.company for x in generate_leads(data.DEFAULT_SEED)]
    )


def rows(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return list(conn.iterdump())


def test_generation_is_byte_for_byte_deterministic(tmp_path):
    first = data.ensure_all(tmp_path / "a")
    second = data.ensure_all(tmp_path / "b")
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    other = data.crm_db(tmp_path / "c", seed=1)
    assert rows(other) != rows(first[1])


def test_generators_are_pure_functions_of_the_seed():
    assert generate_leads(5) == generate_leads(5)
    assert generate_leads(5) != generate_leads(6)
    leads = generate_leads(5)
    assert generate_documents(5, leads) == generate_documents(5, leads)


def test_transcript_is_about_50k_tokens_over_two_hours(transcript):
    tokens = toktok.batch_count([transcript], "o200k_base")[0]
    assert 45_000 <= tokens <= 55_000, tokens
    stamps = re.findall(r"^\[(\d\d):(\d\d):(\d\d)\] ([^:]+):", transcript, re.MULTILINE)
    seconds = [int(h) * 3600 + int(m) * 60 + int(s) for h, m, s, _ in stamps]
    assert seconds == sorted(seconds) and 7000 < seconds[-1] < 2 * 3600
    assert transcript.rstrip().endswith("[02:00:00] Recording stopped.")
    assert len({name for *_, name in stamps}) >= 6


def test_transcript_varies_and_covers_the_acme_deal(transcript):
    sentences = re.split(r"(?<=[.?!]) ", transcript)
    assert len(set(sentences)) / len(sentences) > 0.97
    turns = re.findall(r"^\[[\d:]+\] [^:]+: (.*)$", transcript, re.MULTILINE)
    assert len(set(turns)) == len(turns) > 500
    assert transcript.count("Acme") > 100
    assert "Acme Corp deal deep dive" in transcript


def test_leads_look_real_but_are_fake():
    leads = generate_leads(data.DEFAULT_SEED)
    assert len(leads) == 300
    assert len({x.id for x in leads}) == len({x.email for x in leads}) == 300
    assert len({x.company for x in leads}) == 300
    assert all(re.search(r"@[a-z0-9.-]+\.example\.(com|org)$", x.email) for x in leads)
    assert all(re.fullmatch(r"\+\d{1,3}( \d+)+", x.phone) for x in leads)
    assert {x.stage for x in leads} == set(STAGES)
    acme = [x for x in leads if "Acme" in x.company]
    assert [x.id for x in acme] == [ACME_LEAD_ID]
    assert acme[0].deal_value == max(x.deal_value for x in leads)


def test_documents_include_the_transcript_among_a_few_dozen():
    docs = generate_documents(data.DEFAULT_SEED, generate_leads(data.DEFAULT_SEED))
    assert 25 <= len(docs) <= 60
    assert len({d.id for d in docs}) == len(docs)
    meeting = next(d for d in docs if d.id == MEETING_DOCUMENT_ID)
    assert "Quarterly Business Review" in meeting.title and "Transcript" in meeting.title


def test_package_constants_match_the_generators():
    assert codemode.demo.ACME_LEAD_ID == ACME_LEAD_ID
    assert codemode.demo.MEETING_DOCUMENT_ID == MEETING_DOCUMENT_ID


def test_server_commands_pin_the_data_dir(tmp_path, monkeypatch):
    commands = codemode.demo.server_commands(tmp_path)
    assert set(commands) == {"docs", "crm", "mail"}
    for name, argv in commands.items():
        assert argv[:3] == [sys.executable, "-m", f"codemode.demo.{name}_server"]
        assert argv[3:] == ["--data-dir", str(tmp_path.resolve())]
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "env"))
    assert codemode.demo.server_commands()["crm"][-1] == str((tmp_path / "env").resolve())


def test_losing_a_generation_race_keeps_the_winners_file(tmp_path, monkeypatch):
    """A process that finishes second must not replace a file others may already have open."""
    target = tmp_path / "crm.sqlite"
    winner = data.crm_db(tmp_path / "winner")
    real_build = data._build_crm
    winner_inode: list[int] = []

    def build_then_lose(conn, seed):
        real_build(conn, seed)
        target.write_bytes(winner.read_bytes())  # another process finishes first
        winner_inode.append(target.stat().st_ino)

    monkeypatch.setattr(data, "_build_crm", build_then_lose)
    assert data.crm_db(tmp_path) == target
    assert winner_inode == [target.stat().st_ino]
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["crm.sqlite"]


def test_concurrent_first_starts_produce_one_sound_copy(tmp_path):
    argv = [sys.executable, "-m", "codemode.demo.data", "--data-dir", str(tmp_path)]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(6)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    reference = data.ensure_all(tmp_path / "reference")
    for path, expected in zip(data.ensure_all(tmp_path), reference, strict=True):
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert path.read_bytes() == expected.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
        "crm.sqlite",
        "docs.sqlite",
        "mail.sqlite",
    ]


def test_data_from_another_seed_is_refused_with_a_fix(tmp_path):
    data.crm_db(tmp_path, seed=1)
    with pytest.raises(UsageError, match="--reset"):
        data.crm_db(tmp_path)


def test_reset_regenerates(tmp_path):
    path = data.crm_db(tmp_path, seed=1)
    data.main(["--data-dir", str(tmp_path), "--reset"])
    assert path.exists()
    with sqlite3.connect(path) as conn:
        seed = conn.execute("SELECT value FROM meta WHERE key = 'seed'").fetchone()[0]
    assert seed == str(data.DEFAULT_SEED)
