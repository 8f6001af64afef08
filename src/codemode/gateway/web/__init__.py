"""The HTTP gateway's pages for people: the approval page (MCP elicitation, URL mode)."""
