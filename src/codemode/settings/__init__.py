"""The settings models of codemode's packages, one leaf module per config table.

``codemode.config`` reads every table into these models; importing them loads pydantic and
``codemode.config_model`` and nothing of the package each one configures (no sandbox, agent,
egress proxy or audit log). Each package reads its own from here (``codemode.<package>.settings``
names the same models).
"""
