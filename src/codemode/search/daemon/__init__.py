"""A small per-user search daemon, so a ``codemode search`` after the first answers in
milliseconds instead of importing numpy and the tokenizer and loading the model each time.

    runtime.py  the per-user runtime directory (0700, owned by the user) and each daemon's key
    client.py   ask the daemon for hits; when none answers, start it in the background (once,
                under a lock) while the search answers in its own process
    server.py   the daemon: one stored index, answers one request at a time, exits when idle

A daemon serves one stored index (catalog fingerprint, semantic or lexical, cache directory,
codemode version, interpreter): a changed catalog gets a daemon of its own and the old one
idles out. It listens on a unix socket in the user's runtime directory, answers only peers of
its own uid, and exits after ``CODEMODE_SEARCH_IDLE_S`` seconds (default 600) without requests.
``CODEMODE_SEARCH_DAEMON=0`` (or ``codemode search --no-daemon``) answers in the process instead.
"""
