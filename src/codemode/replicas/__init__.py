"""Stateless gateway replicas: what a session needs, in a store every replica shares.

With ``[gateway] shared_store = "redis://..."`` any replica can serve ``execute``, ``approve``
and ``search`` for any session. ``shared_parts`` (the factory of its parts an engine picks
when it is constructed with a shared store; see ``codemode.engine.parts``) builds instead of
the local ones:

* the session registry: a directory of sessions and a lease per running session
  (``directory``, ``registry``); a session last run elsewhere continues here from its
  checkpoint, which lives in the shared store;
* approvals: decided once, atomically, on any replica; the replica holding the paused
  execution resumes it and publishes the result (``approvals``, ``link``);
* vaults and budgets (``vault``, ``budget``, ``stores``) and the audit log (``audit``).

Without a shared store nothing here is imported: one gateway keeps all of it in memory.
"""

from codemode.replicas.attach import share_state, shared_parts

__all__ = ["share_state", "shared_parts"]
