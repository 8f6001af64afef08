"""The Redis-compatible server fixture lives in tests/conftest.py (``redis_server``)."""
