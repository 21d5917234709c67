#!/bin/bash
# The image's HEALTHCHECK: GET /health on the daemon's own port, healthy on
# HTTP 200. Written with bash's /dev/tcp so the runtime image needs no curl
# (or its TLS and HTTP/2 libraries) for one request; Docker's --timeout ends
# it if the daemon accepts and never answers.
set -eu
port=${WHISPERD_PORT:-8080}
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
# The status line: "HTTP/1.x 200 OK".
read -r _ code _ <&3
[ "$code" = 200 ]
