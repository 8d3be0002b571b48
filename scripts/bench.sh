#!/usr/bin/env bash
# Compares tblimit's decisions per second with the limiters users would pick instead, in one
# run on this machine, and prints one table (bench/, a separate Go module).
set -euo pipefail

readonly PROG="${0##*/}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
readonly ROOT

usage() {
	cat <<EOF
Usage: $PROG [--quick] [--standard] [--sustained] [--arrivals] [--api] [--costs] [HARNESS FLAGS...]

Runs the benchmark harness in bench/ against:
  - tblimit on the embedded engine (default client, WithCoalescing, WithLeases),
    and the same pending transfers sent to the engine directly;
  - the same on a real tigerbeetle server, and the raw tigerbeetle-go client, when
    \$TIGERBEETLE_BIN (or tigerbeetle on PATH) gives a binary: started without
    --development in a temporary directory (-tb-dir DIR, needs Direct I/O), stopped
    and deleted afterwards;
  - the same, and the raw client, on a model of a real server (ledger/simnet,
    RealServer0179: one request in flight, concurrent calls merged, a 0.17.9
    server's costs per request and per event), always;
  - go-redis/redis_rate on a local Redis: redis-server is installed from Debian's
    packages if missing, started on a free loopback port without persistence, and
    stopped on exit. Without it, the redis row says why it was not run;
  - golang.org/x/time/rate, in process;
  - tblimit serve (Envoy's RateLimitService, service/ratelimit) over loopback gRPC,
    on the embedded engine, the model and the real server, where the window is one
    whole Envoy unit (not in the sustained set); and gubernator v2, one daemon in
    process on loopback; the memory per 100,000 active keys of tblimit/embedded,
    tblimit serve/embedded, gubernator and x/time/rate;
  - on the Zipf mix, rows of two limits per key (10 per second and 100 per minute,
    all-or-nothing): a tblimit recipes.Limiter (embedded and modelled), two
    x/time/rate limiters per key, and redis_rate with two limits.

Three sets of cells, all by default:
  standard   cells shorter than the window (1,000,000 decisions or 5 s, window 60 s):
             bench/results/bench.txt, bench.json, bench.png, bench-transfers.png
  sustained  cells longer than the window (5 s, window 2 s; hot user 1,000 and zipf
             users 20 per window), so units expire and come back during a cell, every
             admission checked against "at most the limit in any window":
             bench/results/sustained.txt, sustained.json, sustained.png,
             sustained-transfers.png
  arrivals   keys as a gateway sends them, first seen in the cell, with nothing
             provisioned before the clock starts: churn (Zipf s=1.1 over 10,000,000
             keys) and fresh (a new key per decision), next to the warm zipf cell of
             the same run, as the standard cells (window 60 s, limit 10,000 per key),
             at 1, 16 and 256 callers; rows: tblimit (Lazy resources) and tblimit serve
             on the embedded engine, the model and the real server, the raw client
             creating each new key's account and credit by hand (embedded, model,
             real server), redis_rate, gubernator and x/time/rate. The sliding window
             rows are checked exact (each key admits min(attempts, limit)); the
             report adds each tblimit and raw row's churn and fresh decisions/s over
             its zipf cell:
             bench/results/arrivals.txt, arrivals.json, arrivals.png,
             arrivals-transfers.png
  api        tblimit.v1, tblimit's own API, as tblimit serve --api serves it (beside
             Envoy's protocol, over loopback gRPC, the generated client), at 16 and 256
             callers, warm hot and zipf cells as the standard set's, on the embedded
             engine and the real server: Acquire against the recipe in process and
             against ShouldRateLimit; Pay (a request ID each) against
             ledger.Client.Pay in process. Only when named; about 6 minutes (3 rounds,
             no real server), 7 with a real server and -rounds 1:
             bench/results/api.txt, api.json, api.png, api-transfers.png
  costs      costs known after the call, as an AI gateway meets them: 32 callers on one
             user with a budget of 20,000 tokens a second, each call checked before,
             20 ms long, 200-2,000 tokens, charged after; rows: tblimit serve with a
             plain rule, charge_after and paired (reserve_key/settle_key), tblimit.v1's
             Reserve/Commit and the library's, on the embedded engine and the real
             server, and redis_rate checking with AllowN(0) and charging with
             AllowN(tokens); columns: the worst aligned and sliding second of the calls'
             tokens over the budget, the record's worst window (Audit), the tokens used
             over the budget, decisions/s. Only when named; about 2 minutes:
             bench/results/costs.txt, costs.json
All report transfers per admitted decision (tr/adm), requests and accounts created per
decision (req/dec, acc/dec), and the real-server targets on the real-server and modelled
rows (judged on the warm cells: hot, zipf).

Options:
  --quick      one round of short cells (200,000 decisions or 2 s; sustained: 3 s):
               a smoke run of about 9 minutes (all three sets)
  --standard   run the standard cells
  --sustained  run the sustained cells
  --arrivals   run the arrivals cells
  --api        run the API cells
  --costs      run the costs set
               (any of the five: only the sets named run; none: the first three)
  -h, --help   print this help, then the harness's flags, and exit
Any other flag goes to the harness, for every set run (e.g. -callers 16,256 -workloads
hot -decisions 5000000 -max-time 20s -window 60s -out DIR), after the set's own flags, so
that it wins (e.g. --arrivals -contenders "tblimit/embedded,redis_rate"); see the list
below with --help. With flags that change the window or the cell length, run one set at
a time.
EOF
}

# The rows of the arrivals set: tblimit's plain recipe and tblimit serve on each engine, the
# raw client as their floor, and the limiters that need nothing per key.
ARRIVALS_CONTENDERS="tblimit/embedded,tblimit/modelled,tblimit/tigerbeetle,raw engine,raw client/modelled,\
raw client/tigerbeetle,tblimit serve/embedded,tblimit serve/modelled,tblimit serve/tigerbeetle,\
tblimit serve/journal,tblimit serve/journal on tmpfs,redis_rate,gubernator,x/time/rate"
readonly ARRIVALS_CONTENDERS

# The rows of the API set: Acquire and Pay over tblimit.v1, and their baselines of the same
# run (the recipe and Pay in process, ShouldRateLimit), on each engine.
API_CONTENDERS="tblimit/embedded,tblimit serve/embedded,tblimit api/embedded,tblimit pay/embedded,\
tblimit api pay/embedded,tblimit/tigerbeetle,tblimit serve/tigerbeetle,tblimit api/tigerbeetle,\
tblimit pay/tigerbeetle,tblimit api pay/tigerbeetle"
readonly API_CONTENDERS

die() {
	printf '%s: %s\n' "$PROG" "$*" >&2
	exit 1
}

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }

as_root() {
	if [[ "$(id -u)" == 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		return 1
	fi
}

# install_redis installs redis-server from Debian's packages if it is missing; on failure it
# sets REDIS_REASON.
install_redis() {
	command -v redis-server >/dev/null 2>&1 && return 0
	if ! command -v apt-get >/dev/null 2>&1; then
		REDIS_REASON="redis-server missing, no apt-get to install it"
		return 0
	fi
	log "installing redis-server from Debian's packages"
	if ! as_root apt-get update -qq >&2; then
		REDIS_REASON="redis-server missing, apt-get update failed (needs root)"
		return 0
	fi
	if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >&2; then
		REDIS_REASON="apt-get install redis-server failed"
		return 0
	fi
	command -v redis-server >/dev/null 2>&1 || REDIS_REASON="apt-get installed no redis-server"
}

# port_free reports whether nothing listens on 127.0.0.1:$1.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# start_redis starts redis-server on a free loopback port with no persistence; on success it
# sets REDIS_ADDR and REDIS_PID, on failure REDIS_REASON.
start_redis() {
	REDIS_DIR="$(mktemp -d)"
	local attempt port
	for attempt in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 40000))
		port_free "$port" || continue
		redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
			--dir "$REDIS_DIR" --logfile "$REDIS_DIR/redis.log" --daemonize no \
			>/dev/null 2>&1 </dev/null &
		REDIS_PID=$!
		for _ in $(seq 1 50); do
			if ! kill -0 "$REDIS_PID" 2>/dev/null; then
				break
			fi
			if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
				REDIS_ADDR="127.0.0.1:$port"
				log "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') listening on $REDIS_ADDR (pid $REDIS_PID, no persistence)"
				return 0
			fi
			sleep 0.1
		done
		stop_redis
		log "redis-server did not start on port $port (attempt $attempt): $(tail -n 3 "$REDIS_DIR/redis.log" 2>/dev/null || true)"
	done
	REDIS_REASON="redis-server did not start (log: $REDIS_DIR/redis.log)"
}

stop_redis() {
	if [[ -n "${REDIS_PID:-}" ]]; then
		kill "$REDIS_PID" 2>/dev/null || true
		wait "$REDIS_PID" 2>/dev/null || true
		REDIS_PID=""
	fi
}

cleanup() {
	stop_redis
	if [[ -z "${REDIS_REASON:-}" && -n "${REDIS_DIR:-}" ]]; then
		rm -rf "$REDIS_DIR"
	fi
	if [[ -n "${BUILD_DIR:-}" ]]; then
		rm -rf "$BUILD_DIR"
	fi
}

main() {
	local args=() help=0 standard=0 sustained=0 arrivals=0 api=0 costs=0
	for a in "$@"; do
		case "$a" in
		-h | --help | -help) help=1 ;;
		--standard) standard=1 ;;
		--sustained) sustained=1 ;;
		--arrivals) arrivals=1 ;;
		--api) api=1 ;;
		--costs) costs=1 ;;
		*) args+=("$a") ;;
		esac
	done
	if [[ $standard == 0 && $sustained == 0 && $arrivals == 0 && $api == 0 && $costs == 0 ]]; then
		standard=1 sustained=1 arrivals=1
	fi
	command -v go >/dev/null 2>&1 || die "go is not installed"

	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	BUILD_DIR="$(mktemp -d)"
	(cd "$ROOT/bench" && go build -o "$BUILD_DIR/bench" .) || die "could not build the harness in bench/"
	if [[ $help == 1 ]]; then
		usage
		echo
		echo "Harness flags:"
		"$BUILD_DIR/bench" -help 2>&1 | tail -n +2
		return 0
	fi

	REDIS_REASON="" REDIS_ADDR="" REDIS_PID=""
	install_redis
	if [[ -z "$REDIS_REASON" ]]; then
		start_redis
	fi
	local redis_flags=()
	if [[ -n "$REDIS_ADDR" ]]; then
		redis_flags=(-redis "$REDIS_ADDR")
	else
		log "redis_rate will not run: $REDIS_REASON"
		redis_flags=(-redis-not-run "$REDIS_REASON")
	fi

	# The real-server rows run when testenv finds a binary ($TIGERBEETLE_BIN, else PATH).
	local rev status=0
	rev="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
	local common=(-out "$ROOT/bench/results" -rev "$rev" "${redis_flags[@]}")
	if [[ $standard == 1 ]]; then
		log "standard cells (shorter than the window): bench/results/bench.*"
		"$BUILD_DIR/bench" "${common[@]}" ${args[@]+"${args[@]}"} || status=$?
	fi
	if [[ $sustained == 1 ]]; then
		log "sustained cells (longer than the window): bench/results/sustained.*"
		"$BUILD_DIR/bench" "${common[@]}" -sustained ${args[@]+"${args[@]}"} || status=$?
	fi
	if [[ $arrivals == 1 ]]; then
		log "arrivals cells (keys first seen in the cell, nothing provisioned): bench/results/arrivals.*"
		"$BUILD_DIR/bench" "${common[@]}" -name arrivals -workloads zipf,churn,fresh -memory=false \
			-contenders "$ARRIVALS_CONTENDERS" ${args[@]+"${args[@]}"} || status=$?
	fi
	if [[ $api == 1 ]]; then
		log "API cells (tblimit.v1 against the library and ShouldRateLimit): bench/results/api.*"
		"$BUILD_DIR/bench" "${common[@]}" -name api -callers 16,256 -memory=false \
			-contenders "$API_CONTENDERS" ${args[@]+"${args[@]}"} || status=$?
	fi
	if [[ $costs == 1 ]]; then
		log "costs known after the call (check before, charge after): bench/results/costs.*"
		"$BUILD_DIR/bench" "${common[@]}" -costs ${args[@]+"${args[@]}"} || status=$?
	fi
	return "$status"
}

main "$@"
