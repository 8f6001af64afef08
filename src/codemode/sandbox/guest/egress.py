"""The way out through the host's egress proxy, for HTTP clients that honour proxy variables.

The sandbox may create only AF_UNIX sockets. So the proxy's name resolves to the proxy's Unix
socket: ``getaddrinfo("egress.codemode", ...)`` answers ``(AF_UNIX, SOCK_STREAM, 0, "",
path)``, and ``socket.create_connection`` (requests/urllib3, httpx, urllib.request) makes an
AF_UNIX socket and connects it there. TCP-only options (``TCP_NODELAY``) set on such a socket
are ignored instead of failing. Standard library only.
"""

import os
import socket

PROXY_NAME = "egress.codemode"
PROXY_URL = "http://" + PROXY_NAME + ":3128"
_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")


def install(path):
    real_getaddrinfo = socket.getaddrinfo
    real_setsockopt = socket.socket.setsockopt

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
        if isinstance(name, str) and name.lower().rstrip(".") == PROXY_NAME:
            return [(socket.AF_UNIX, socket.SOCK_STREAM, 0, "", path)]
        return real_getaddrinfo(host, port, family, type, proto, flags)

    def setsockopt(self, level, option, *value):
        try:
            return real_setsockopt(self, level, option, *value)
        except OSError:
            if self.family == socket.AF_UNIX and level == socket.IPPROTO_TCP:
                return None  # TCP_NODELAY and friends mean nothing on a Unix socket
            raise

    getaddrinfo.__doc__ = real_getaddrinfo.__doc__
    socket.getaddrinfo = getaddrinfo
    socket.socket.setsockopt = setsockopt
    for variable in _VARIABLES:
        os.environ[variable] = PROXY_URL
    for variable in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        os.environ.pop(variable, None)
