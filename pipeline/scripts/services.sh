#!/usr/bin/env bash
# Local services (Redis, ClickHouse, kcat) for `make run`, `make test` and CI,
# and the tools the tests use (chromium for the browser tests, curl for the
# npm assets).
#
# Usage:
#   services.sh install
#   services.sh start redis PORT DIR
#   services.sh start clickhouse TCPPORT HTTPPORT DIR
#   services.sh stop redis|clickhouse DIR
#   services.sh status
#
# Every instance binds to 127.0.0.1 only and keeps all of its state (data,
# pid file, logs, generated config) under DIR, so several instances (e.g. a
# dev one and a test one) can run side by side on different ports and DIRs.
# `start` is idempotent: if the port already answers, nothing is started.
set -euo pipefail

PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin
PROG=${0##*/}

REDIS_START_TIMEOUT=${REDIS_START_TIMEOUT:-20}
CLICKHOUSE_START_TIMEOUT=${CLICKHOUSE_START_TIMEOUT:-60}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}

die() {
	echo "$PROG: $*" >&2
	exit 1
}

log() {
	echo "$PROG: $*" >&2
}

usage() {
	cat >&2 <<EOF
usage:
  $PROG install
  $PROG start redis PORT DIR
  $PROG start clickhouse TCPPORT HTTPPORT DIR
  $PROG stop redis|clickhouse DIR
  $PROG status
EOF
	exit 2
}

check_port() {
	if ! [[ $1 =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > 65535)); then
		die "invalid port: '$1'"
	fi
}

# abs_dir DIR: create DIR and print its absolute path.
abs_dir() {
	mkdir -p -- "$1"
	(cd -- "$1" && pwd -P)
}

# pid_alive PIDFILE NAME: succeed if PIDFILE names a live process whose
# command line mentions NAME (guards against a recycled pid).
pid_alive() {
	local pidfile=$1 name=$2 pid
	[[ -s $pidfile ]] || return 1
	pid=$(tr -dc '0-9' <"$pidfile")
	[[ -n $pid ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$name"
}

read_pid() {
	tr -dc '0-9' <"$1"
}

# have CMD: succeed if CMD is on PATH (sbin dirs were added above: Debian
# puts clickhouse-server in /usr/sbin, which a non-root PATH may lack).
have() {
	command -v "$1" >/dev/null 2>&1
}

# ---------------------------------------------------------------- install

install_services() {
	# command -> Debian package providing it
	local -a need=()
	have redis-server || need+=(redis-server)
	have redis-cli || need+=(redis-tools)
	have clickhouse-server || need+=(clickhouse-server)
	have clickhouse-client || need+=(clickhouse-client)
	have kcat || need+=(kcat)
	have chromium || need+=(chromium)
	have curl || need+=(curl ca-certificates)
	have openssl || need+=(openssl)

	if ((${#need[@]} == 0)); then
		log "install: redis-server, clickhouse-server, clickhouse-client, kcat, chromium and curl are already installed"
		return 0
	fi

	if ((EUID != 0)) || ! command -v apt-get >/dev/null 2>&1; then
		echo "$PROG: missing tools; please install these Debian packages (as root): apt-get install -y --no-install-recommends ${need[*]}" >&2
		exit 1
	fi

	log "install: installing ${need[*]}"
	# Keep the packages' maintainer scripts from starting system-wide
	# services (a system redis on 6379 would collide with `make run`).
	local policy=/usr/sbin/policy-rc.d created_policy=0
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		created_policy=1
		# shellcheck disable=SC2064 # expand now on purpose
		trap "rm -f '$policy'" EXIT
	fi

	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y --no-install-recommends "${need[@]}"

	if ((created_policy)); then
		rm -f "$policy"
		trap - EXIT
	fi

	local c
	for c in redis-server redis-cli clickhouse-server clickhouse-client kcat chromium curl openssl; do
		have "$c" || die "install: $c still missing after apt-get install"
	done
	log "install: done"
}

# ---------------------------------------------------------------- redis

redis_ping() {
	local port=$1
	# timeout: a non-redis listener (e.g. an HTTP port) would never answer.
	[[ $(timeout 3 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]
}

start_redis() {
	(($# == 2)) || usage
	local port=$1 dir
	check_port "$port"
	have redis-server || die "redis-server not found; run: $PROG install"
	dir=$(abs_dir "$2")

	if redis_ping "$port"; then
		log "redis already answering on 127.0.0.1:$port"
		return 0
	fi

	local pidfile=$dir/redis.pid logfile=$dir/redis.log
	if ! pid_alive "$pidfile" redis-server; then
		rm -f -- "$pidfile"
		: >"$logfile"
		redis-server \
			--bind 127.0.0.1 \
			--port "$port" \
			--protected-mode yes \
			--daemonize yes \
			--dir "$dir" \
			--pidfile "$pidfile" \
			--logfile "$logfile" \
			--save "" \
			--appendonly no \
			</dev/null
	fi

	local start=$SECONDS why="did not answer within ${REDIS_START_TIMEOUT}s"
	while ((SECONDS - start < REDIS_START_TIMEOUT)); do
		if redis_ping "$port"; then
			log "redis up on 127.0.0.1:$port (dir $dir)"
			return 0
		fi
		# Give up early if the server already died (port taken...).
		if ((SECONDS - start >= 2)) && ! pid_alive "$pidfile" redis-server; then
			why="exited during startup"
			break
		fi
		sleep 0.25
	done
	log "redis on 127.0.0.1:$port $why; last log lines:"
	tail -n 20 -- "$logfile" >&2 || true
	exit 1
}

# ---------------------------------------------------------------- clickhouse

clickhouse_ping() {
	local port=$1
	timeout 5 clickhouse-client --host 127.0.0.1 --port "$port" \
		--connect_timeout 2 --receive_timeout 3 --send_timeout 3 \
		-q 'SELECT 1' >/dev/null 2>&1
}

write_clickhouse_config() {
	local tcp=$1 http=$2 dir=$3
	# The one configuration, shared with the Go stack runner (make run).
	local src
	src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../internal/stack/clickhouse" && pwd)"
	sed -e "s|@DIR@|$dir|g" -e "s|@TCP_PORT@|$tcp|g" -e "s|@HTTP_PORT@|$http|g" "$src/config.xml" >"$dir/config.xml"
	cp "$src/users.xml" "$dir/users.xml"
	printf '<?xml version="1.0"?>\n<yandex></yandex>\n' >"$dir/metrika.xml"
}

start_clickhouse() {
	(($# == 3)) || usage
	local tcp=$1 http=$2 dir
	check_port "$tcp"
	check_port "$http"
	have clickhouse-server || die "clickhouse-server not found; run: $PROG install"
	have clickhouse-client || die "clickhouse-client not found; run: $PROG install"
	dir=$(abs_dir "$3")

	if clickhouse_ping "$tcp"; then
		log "clickhouse already answering on 127.0.0.1:$tcp"
		return 0
	fi

	local pidfile=$dir/clickhouse-server.pid
	if ! pid_alive "$pidfile" "$dir/config.xml"; then
		rm -f -- "$pidfile"
		mkdir -p -- "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas" "$dir/log"
		write_clickhouse_config "$tcp" "$http" "$dir"
		: >"$dir/log/stdout.log"
		# --daemon forks and detaches; the server writes the pid file itself.
		clickhouse-server --daemon \
			--config-file="$dir/config.xml" \
			--pid-file="$pidfile" \
			</dev/null >>"$dir/log/stdout.log" 2>&1 ||
			{
				tail -n 20 -- "$dir/log/stdout.log" "$dir/log/clickhouse-server.err.log" >&2 2>/dev/null || true
				die "clickhouse-server failed to launch"
			}
	fi

	local start=$SECONDS why="did not answer within ${CLICKHOUSE_START_TIMEOUT}s"
	while ((SECONDS - start < CLICKHOUSE_START_TIMEOUT)); do
		if clickhouse_ping "$tcp"; then
			log "clickhouse up on 127.0.0.1:$tcp (http $http, dir $dir)"
			return 0
		fi
		# Give up early if the server already died (port taken, bad config...).
		if ((SECONDS - start >= 2)) && ! pid_alive "$pidfile" "$dir/config.xml"; then
			why="exited during startup"
			break
		fi
		sleep 0.25
	done
	log "clickhouse on 127.0.0.1:$tcp $why; last log lines:"
	tail -n 20 -- "$dir/log/stdout.log" "$dir/log/clickhouse-server.err.log" >&2 2>/dev/null || true
	exit 1
}

# ---------------------------------------------------------------- stop

stop_service() {
	(($# == 2)) || usage
	local svc=$1 dir=$2 pidfile name
	case $svc in
	redis) pidfile=$dir/redis.pid name=redis-server ;;
	clickhouse) pidfile=$dir/clickhouse-server.pid name=clickhouse-server ;;
	*) usage ;;
	esac

	if ! pid_alive "$pidfile" "$name"; then
		rm -f -- "$pidfile"
		log "$svc in $dir is not running"
		return 0
	fi

	local pid i start=$SECONDS
	pid=$(read_pid "$pidfile")
	kill -TERM "$pid" 2>/dev/null || true
	while ((SECONDS - start < STOP_TIMEOUT)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f -- "$pidfile"
			log "$svc (pid $pid) stopped"
			return 0
		fi
		sleep 0.25
	done
	log "$svc (pid $pid) still running after ${STOP_TIMEOUT}s; sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 40; i++)); do
		kill -0 "$pid" 2>/dev/null || {
			rm -f -- "$pidfile"
			return 0
		}
		sleep 0.25
	done
	die "$svc (pid $pid) did not exit"
}

# ---------------------------------------------------------------- status

status() {
	local found=0 p pid comm cmd port cfg tcp http state
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		# comm, not exe: Debian's redis-server is a symlink to redis-check-rdb,
		# and comm is cut to 15 chars ("clickhouse-serv").
		comm=$(cat "$p/comm" 2>/dev/null) || continue
		case $comm in
		redis-server)
			cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
			# redis retitles itself "redis-server 127.0.0.1:PORT"
			port=${cmd##*:}
			port=${port%% *}
			state=down
			[[ $port =~ ^[0-9]+$ ]] && redis_ping "$port" && state=up
			# redis chdirs into its --dir
			echo "redis       pid=$pid port=$port state=$state dir=$(readlink "$p/cwd" 2>/dev/null || echo '?')"
			found=1
			;;
		clickhouse-serv* | clickhouse)
			cmd=$(tr '\0' '\n' <"$p/cmdline" 2>/dev/null) || continue
			[[ $cmd == *server* ]] || continue
			cfg=$(sed -n 's/^--config-file=//p' <<<"$cmd" | head -n 1)
			tcp='?' http='?'
			if [[ -n $cfg && -r $cfg ]]; then
				tcp=$(sed -n 's:.*<tcp_port>\([0-9]*\)</tcp_port>.*:\1:p' "$cfg" | head -n 1)
				http=$(sed -n 's:.*<http_port>\([0-9]*\)</http_port>.*:\1:p' "$cfg" | head -n 1)
			fi
			state=down
			[[ $tcp =~ ^[0-9]+$ ]] && clickhouse_ping "$tcp" && state=up
			echo "clickhouse  pid=$pid tcp=$tcp http=$http state=$state dir=${cfg%/config.xml}"
			found=1
			;;
		*) ;;
		esac
	done
	((found)) || echo "no redis-server or clickhouse-server running"
}

# ---------------------------------------------------------------- main

main() {
	(($# >= 1)) || usage
	local cmd=$1
	shift
	case $cmd in
	install)
		(($# == 0)) || usage
		install_services
		;;
	start)
		(($# >= 1)) || usage
		local svc=$1
		shift
		case $svc in
		redis) start_redis "$@" ;;
		clickhouse) start_clickhouse "$@" ;;
		*) usage ;;
		esac
		;;
	stop) stop_service "$@" ;;
	status) status ;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
