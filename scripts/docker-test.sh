#!/usr/bin/env bash
# Builds the container image (docker/Dockerfile) and checks it end to end:
#   1. the image builds (the build dependencies stage is kept, tagged
#      whisperd-deps:cache, so the next run skips the apt downloads);
#   2. it starts with tiny.en mounted read-only and reaches /ready;
#   3. a real transcription of tests/data/audio/jfk.wav says "ask not what
#      your country can do for you";
#   4. Docker's HEALTHCHECK turns healthy;
#   5. `docker stop` during requests in flight drains: exit code 0, and each
#      request gets its transcript (200) or a clean 503, none a reset.
# Prints the image size, the build time and the cold start to ready.
#
# Needs: docker (a daemon: if none answers and dockerd is installed, this
# script starts one for its own run, as root), the base images (made with
# docker/bootstrap-base.sh when missing), models/ggml-tiny.en.bin, curl.
# Fails loudly when any of these cannot be had.
#
# Usage: scripts/docker-test.sh [--clean]
#   --clean  also remove whisperd-deps:cache at the end
# Environment: WD_DOCKER_NETWORK=host to build with host networking when the
# containers' bridge does not reach the apt mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

clean_deps=0
[ "${1:-}" = --clean ] && clean_deps=1

die() { echo "docker-test: FAIL: $*" >&2; exit 1; }
say() { echo "docker-test: $*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

command -v docker >/dev/null || die "docker CLI not found (apt-get install docker.io)"
command -v curl >/dev/null || die "curl not found"

# Everything this run makes, removed on exit whatever happens.
tag="whisperd-test:$$"
ctr="whisperd-test-$$"
work=$(mktemp -d /tmp/wd-docker-test.XXXXXX)
dockerd_pid=""
cleanup() {
  local rc=$?
  docker rm -f "$ctr" >/dev/null 2>&1 || true
  docker rmi -f "$tag" >/dev/null 2>&1 || true
  # The compile stage's image (untagged; its layer holds the build tree).
  docker image prune -f --filter label=org.whisperd.stage=build >/dev/null 2>&1 || true
  if [ "$clean_deps" = 1 ]; then docker rmi -f whisperd-deps:cache >/dev/null 2>&1 || true; fi
  if [ -n "$dockerd_pid" ]; then
    kill "$dockerd_pid" 2>/dev/null || true
    wait "$dockerd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A Docker daemon: the running one, or one started for this run (a CI
# machine without systemd has nobody else to start it).
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || die "no Docker daemon answers and dockerd is not installed (apt-get install docker.io)"
  [ "$(id -u)" -eq 0 ] || die "no Docker daemon answers, and starting one needs root"
  say "starting dockerd for this run (log $work/dockerd.log)"
  dockerd >"$work/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { tail -20 "$work/dockerd.log" >&2; die "dockerd did not come up"; }
fi

docker/bootstrap-base.sh || die "no base images (docker/bootstrap-base.sh failed)"

model=$(readlink -f models/ggml-tiny.en.bin 2>/dev/null || true)
[ -n "$model" ] && [ -f "$model" ] || die "models/ggml-tiny.en.bin missing (scripts/fetch-model.sh tiny.en)"
audio=tests/data/audio/jfk.wav
[ -f "$audio" ] || die "$audio missing"

# --- 1. build -------------------------------------------------------------
net=()
[ -n "${WD_DOCKER_NETWORK:-}" ] && net=(--network "$WD_DOCKER_NETWORK")
t0=$(now)
docker build "${net[@]}" -f docker/Dockerfile --target deps -t whisperd-deps:cache . \
  >"$work/build-deps.log" 2>&1 || { tail -30 "$work/build-deps.log" >&2; die "build of the deps stage failed"; }
t_deps=$(since "$t0")
t1=$(now)
docker build "${net[@]}" -f docker/Dockerfile -t "$tag" . \
  >"$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; die "image build failed"; }
t_build=$(since "$t1")
size=$(docker image inspect -f '{{.Size}}' "$tag")
say "built $tag: deps stage ${t_deps} s, compile + runtime ${t_build} s, image $((size / 1000000)) MB"
grep -m1 '^runtime packages:' "$work/build.log" | sed 's/^/docker-test: /' || true

# --- 2. start and wait for /ready -----------------------------------------
# The model file itself (models/ may be a link into another checkout),
# read-only, at the path the image's WHISPERD_MODEL names. The health probe runs every second here
# (the image's 30 s interval would make this test wait).
t2=$(now)
docker run -d --name "$ctr" -p 127.0.0.1::8080 \
  -v "$model:/models/ggml-tiny.en.bin:ro" \
  --health-interval 1s --health-start-period 60s \
  "$tag" >/dev/null || die "docker run failed"
hostport=$(docker port "$ctr" 8080/tcp | head -1)
[ -n "$hostport" ] || die "no published port"
url="http://$hostport"
ready=0
for _ in $(seq 600); do
  if [ "$(docker inspect -f '{{.State.Running}}' "$ctr")" != true ]; then
    docker logs "$ctr" >&2 || true
    die "the container exited during start-up"
  fi
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/ready" || true)" = 200 ]; then ready=1; break; fi
  sleep 0.2
done
[ "$ready" = 1 ] || { docker logs "$ctr" >&2; die "not ready after 120 s"; }
t_ready=$(since "$t2")
inner=$(docker logs "$ctr" 2>&1 | sed -n 's/.*serve: ready in \([0-9]*\) ms.*/\1/p' | head -1)
say "cold start: docker run to /ready ${t_ready} s (the daemon's own count: ${inner:-?} ms)"
docker logs "$ctr" 2>&1 | grep -iE 'device|engine' | head -3 | sed 's/^/docker-test:   log: /' || true

# --- 3. a real transcription ----------------------------------------------
want="ask not what your country can do for you"
t3=$(now)
code=$(curl -s -o "$work/jfk.json" -w '%{http_code}' "$url/v1/audio/transcriptions" \
  -F "file=@$audio" -F model=whisper-1) || die "transcription request failed"
t_req=$(since "$t3")
[ "$code" = 200 ] || { cat "$work/jfk.json" >&2; die "transcription answered $code"; }
grep -qF "$want" "$work/jfk.json" || { cat "$work/jfk.json" >&2; die "transcript lacks '$want'"; }
say "transcription of $audio: 200 in ${t_req} s: $(head -c 160 "$work/jfk.json")"

# --- 4. HEALTHCHECK -------------------------------------------------------
health=""
for _ in $(seq 60); do
  health=$(docker inspect -f '{{.State.Health.Status}}' "$ctr")
  [ "$health" = healthy ] && break
  sleep 0.5
done
[ "$health" = healthy ] || { docker inspect -f '{{json .State.Health}}' "$ctr" >&2; die "health is '$health'"; }
say "HEALTHCHECK: healthy"

# --- 5. docker stop with requests in flight -------------------------------
# Six requests at once (max-batch 8: all run together), stop as soon as the
# worker holds one. Each must end in 200 with the transcript or 503 with a
# JSON error; a reset or an empty answer (curl code 000) fails.
n_req=6
pids=()
for i in $(seq "$n_req"); do
  curl -s -o "$work/stop-$i.json" -w '%{http_code}' "$url/v1/audio/transcriptions" \
    -F "file=@$audio" -F model=whisper-1 >"$work/stop-$i.code" 2>/dev/null &
  pids+=($!)
done
inflight=0
for _ in $(seq 200); do
  n=$(curl -s "$url/metrics" | sed -n 's/^whisperd_http_connections_suspended \([0-9]*\).*/\1/p')
  if [ "${n:-0}" -ge 1 ]; then inflight=$n; break; fi
  sleep 0.05
done
[ "$inflight" -ge 1 ] || die "no request reached the worker before the stop"
t4=$(now)
docker stop -t 40 "$ctr" >/dev/null || die "docker stop failed"
t_stop=$(since "$t4")
for p in "${pids[@]}"; do wait "$p" || true; done
exit_code=$(docker inspect -f '{{.State.ExitCode}}' "$ctr")
oom=$(docker inspect -f '{{.State.OOMKilled}}' "$ctr")
n200=0 n503=0
for i in $(seq "$n_req"); do
  c=$(cat "$work/stop-$i.code" 2>/dev/null || echo 000)
  case "$c" in
    200) grep -qF "$want" "$work/stop-$i.json" || die "request $i: 200 without the transcript"
         n200=$((n200 + 1)) ;;
    503) grep -q '"error"' "$work/stop-$i.json" || die "request $i: 503 without a JSON error"
         n503=$((n503 + 1)) ;;
    *)   cat "$work/stop-$i.json" >&2 || true
         die "request $i in flight at the stop ended with '$c' (want 200 or 503)" ;;
  esac
done
docker logs "$ctr" 2>&1 | tail -5 | sed 's/^/docker-test:   log: /'
[ "$oom" = false ] || die "the container was OOM-killed"
[ "$exit_code" = 0 ] || die "exit code $exit_code after docker stop (want 0)"
say "docker stop with $inflight request(s) at the worker: exit 0 in ${t_stop} s; of $n_req in flight, $n200 answered 200 with the transcript, $n503 answered 503"
say "PASS (image $((size / 1000000)) MB, build ${t_deps} + ${t_build} s, ready in ${t_ready} s)"
