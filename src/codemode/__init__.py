"""codemode: agents use tools by writing code that runs in a sandbox."""

__version__ = "0.1.0"
