"""Words for lexical search: splitting identifiers and prose, stopwords, a light stemmer, synonyms.

Documents and queries go through the same ``terms()`` so that the index stores exactly the
tokens a query can produce; SQLite's tokenizer then only splits on spaces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["STOPWORDS", "SYNONYMS", "expand_query", "split_words", "stem", "strip_markup", "terms"]

_TAG = re.compile(r"<[^>]+>")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])|([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|[0-9]+")

_STOPWORD_TEXT = """
    a an the and or of to in on for by with from at as is are be been being was were it its this
    that these those there their them they i me my mine we our you your he she his her can could
    would should will shall may might must do does did doing done have has had having how what
    which who whom whose when where why all any some each every one no not only own same so than
    too very just also into onto about over under again then once here out up down off more most
    other such both few nor if but because until while using use via per
    please want need like know let lets get make sure going somebody someone something thing stuff
    """
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# Word groups a user may type for the same API verb or noun. A query word brings its group.
_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("create", "add", "new", "make", "register", "open", "start", "post"),
    ("delete", "remove", "destroy", "erase", "drop", "revoke", "purge", "cancel", "kick"),
    ("list", "enumerate", "browse", "index", "show", "every", "many"),
    ("update", "edit", "modify", "change", "patch", "set", "rename", "configure", "adjust"),
    ("retrieve", "get", "fetch", "read", "view", "look", "details", "info", "inspect", "find"),
    ("search", "find", "query", "lookup", "filter"),
    ("user", "member", "person", "people", "collaborator"),
    ("organization", "org", "company"),
    ("repository", "repo", "project"),
    ("issue", "ticket", "bug"),
    ("pull", "pr", "merge"),
    ("refund", "reimburse", "reimbursement"),
    ("payment", "charge", "pay", "paid"),
    ("subscription", "plan", "recurring"),
    ("customer", "client", "buyer", "shopper"),
    ("dns", "record", "records", "domain"),
    ("zone", "domain", "site", "website"),
    ("worker", "script", "serverless"),
    ("token", "key", "credential", "secret"),
    ("firewall", "waf", "block", "ban"),
    ("certificate", "cert", "ssl", "tls"),
    ("invite", "invitation"),
    ("stop", "disable", "pause", "suspend"),
    ("enable", "activate", "resume", "turn"),
    # API vocabulary people rarely use (added from the dev split's misses; see benchmarks/).
    ("purge", "clear", "flush", "invalidate"),
    ("deploy", "publish", "upload", "ship"),
    ("member", "coworker", "colleague", "teammate", "employee", "staff"),
    ("throttle", "rate", "limit"),
    ("stargazer", "star", "starred"),
    ("webhook", "hook", "callback", "notify"),
    ("gist", "snippet", "paste"),
    ("dependabot", "vulnerable", "vulnerability"),
    ("balance", "money", "funds"),
    ("event", "history", "activity", "happened"),
    ("ref", "branch"),
    ("workflow", "ci", "pipeline", "build", "actions"),
)

_IRREGULAR = {"children": "child", "people": "person", "indices": "index", "data": "data"}


def strip_markup(text: str) -> str:
    """Drop HTML tags and Markdown link targets (Stripe and GitHub descriptions carry both)."""
    return _TAG.sub(" ", _LINK.sub(r"\1", text))


def split_words(text: str) -> list[str]:
    """Lower-case words of prose or identifiers: ``listRepoIssues`` -> list, repo, issues."""
    spaced = _CAMEL.sub(lambda m: f"{m[1] or m[3]} {m[2] or m[4]}", strip_markup(text))
    return [word.lower() for word in _WORD.findall(spaced)]


def stem(word: str) -> str:
    """A light suffix stripper: plurals, -ing, -ed. Good enough to join list/lists, tag/tagged."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 3:
        return word
    for suffix, repl, min_stem in (
        ("ies", "y", 3),
        ("sses", "ss", 2),
        ("xes", "x", 2),
        ("ches", "ch", 2),
        ("shes", "sh", 2),
        ("ing", "", 3),
        ("ed", "", 3),
        ("s", "", 3),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= min_stem:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            base = word[: len(word) - len(suffix)] + repl
            # undo doubled consonants: "tagged" -> "tag", "running" -> "run"
            if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2] != "l":
                base = base[:-1]
            return _drop_final_e(base)
    return _drop_final_e(word)


def _drop_final_e(word: str) -> str:
    # "create", "created" and "creating" all become "creat".
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


def terms(text: str, *, drop_stopwords: bool = False) -> list[str]:
    """Stemmed words of ``text``, as stored in the index and used in queries."""
    words = split_words(text)
    if drop_stopwords:
        words = [w for w in words if w not in STOPWORDS]
    return [stem(w) for w in words]


def _build_synonyms(groups: Iterable[tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    table: dict[str, list[str]] = {}
    for group in groups:
        stems = [stem(w) for w in group]
        for word in stems:
            bucket = table.setdefault(word, [])
            bucket.extend(s for s in stems if s != word and s not in bucket)
    return {word: tuple(others) for word, others in table.items()}


SYNONYMS = _build_synonyms(_SYNONYM_GROUPS)


def expand_query(query: str) -> list[tuple[str, tuple[str, ...]]]:
    """Query terms (stopwords dropped, stemmed, de-duplicated) each with its synonyms."""
    seen: set[str] = set()
    out: list[tuple[str, tuple[str, ...]]] = []
    words = terms(query, drop_stopwords=True) or terms(query)
    for word in words:
        if word in seen:
            continue
        seen.add(word)
        out.append((word, SYNONYMS.get(word, ())))
    return out
