"""The owner's own values back in what the approval page shows (never in what the model sees)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codemode.errors import SessionError

if TYPE_CHECKING:
    from codemode.engine import Codemode
    from codemode.gateway.web.links import ApprovalLink, ApprovalLinks
    from codemode.policy.approval import ApprovalRequest

__all__ = ["flows", "mint_page", "reveal"]


def _privacy(engine: Codemode, owner: str | None, session: str | None) -> Any:
    registry = engine.registry
    if registry is None or session is None:
        return None
    try:
        return registry.get(session, owner).chain.privacy
    except SessionError:
        return None


def flows(
    engine: Codemode, arguments: Any, owner: str | None, session: str | None, destination: str
) -> list[str]:
    """For each hidden value in ``arguments``: where it came from and whether the data-flow
    rules let it go to ``destination`` (the call's server), in words."""
    import json

    from codemode.privacy.vault import TOKEN_PATTERN

    privacy = _privacy(engine, owner, session)
    if privacy is None:
        return []
    text = json.dumps(arguments, ensure_ascii=False, default=repr)
    lines: list[str] = []
    for token in dict.fromkeys(match.group(0) for match in TOKEN_PATTERN.finditer(text)):
        entry = privacy.vault.lookup(token)
        if entry is None:
            continue
        origins = sorted(entry.origins) or ["(the code)"]
        verdicts = []
        for origin in origins:
            allowed = origin == "(the code)" or privacy.settings.may_flow(origin, destination)
            rule = (
                "the same server"
                if origin == destination
                else privacy.settings.flow_targets(origin)[1]
            )
            verdicts.append(f"from {origin}: {'allowed' if allowed else 'refused'} ({rule})")
        lines.append(f"{token} ({entry.kind}) to {destination}: " + "; ".join(verdicts))
    return lines


def reveal(engine: Codemode, value: Any, owner: str | None, session: str | None) -> Any:
    """``value`` with the session's privacy tokens replaced by the values they stand for:
    only for the session's owner (a foreign session is not found) and only for a page that
    person sees. Without a privacy net, or a session, ``value`` as it is."""
    from codemode.privacy.tokenizer import detokenize

    privacy = _privacy(engine, owner, session)
    if privacy is None:
        return value
    return detokenize(value, privacy.vault, destination="the approval page")


def mint_page(
    links: ApprovalLinks,
    engine: Codemode,
    approval: ApprovalRequest,
    owner: str | None,
    session: str | None,
    printed: str = "",
) -> ApprovalLink:
    """The approval page's link for ``approval``: the arguments and the output printed before
    the pause with the owner's values revealed, and where each hidden value may flow."""
    arguments = approval.arguments
    return links.mint(
        approval.to_dict(),
        owner=owner,
        session=session,
        revealed=reveal(engine, arguments, owner, session),
        printed=reveal(engine, printed, owner, session),
        flows=flows(engine, arguments, owner, session, approval.server),
    )
