#!/usr/bin/env bash
# Local services (Redis, ClickHouse, kcat, and an Apache Kafka broker for the
# tests that need a real one) for `make run`, `make test` and CI, and the tools
# the tests use (chromium for the browser tests, curl for the npm assets, node
# and npm for the AsyncAPI parser).
#
# Usage:
#   services.sh install
#   services.sh install-kafka
#   services.sh install-elasticmq
#   services.sh installed SERVICE
#   services.sh start redis PORT DIR
#   services.sh start redis-cluster PORT DIR
#   services.sh start clickhouse TCPPORT HTTPPORT DIR
#   services.sh start kafka PORT DIR
#   services.sh start nats PORT DIR
#   services.sh start rabbitmq PORT DIR
#   services.sh start elasticmq PORT DIR
#   services.sh stop SERVICE DIR
#   services.sh kill SERVICE DIR
#   services.sh kafka-requests DIR JMXPORT
#   services.sh status
#
# Every instance binds to 127.0.0.1 only and keeps all of its state (data,
# pid file, logs, generated config) under DIR, so several instances (e.g. a
# dev one and a test one) can run side by side on different ports and DIRs.
# `start` is idempotent: if the port already answers, nothing is started.
# `kill` SIGKILLs an instance (to test crash recovery); its data is kept, and
# `start` on the same DIR brings it back on that data.
#
# Kafka: `install-kafka` fetches Apache Kafka's jars (the pinned release and
# its runtime dependencies) from Maven Central with Maven into
# .build/kafka-VERSION/libs of the repository (needs java 17+ and mvn).
# `start kafka PORT DIR` runs a single-node KRaft broker+controller:
#   127.0.0.1:PORT     PLAINTEXT
#   127.0.0.1:PORT+1   SASL_SSL, SCRAM-SHA-512 user hookpipe, password
#                      hookpipe-secret; server cert for 127.0.0.1/localhost
#                      from a CA made on first start, DIR/ca.pem
#   127.0.0.1:PORT+2   controller
# Topics are not auto-created. librdkafka before 2.6.1 (Debian 12's kcat has
# 2.0.2) fails SCRAM against any Kafka 4.x (a client nonce bug): use kcat on
# PLAINTEXT only.
#
# Redis Cluster: `start redis-cluster PORT DIR` runs three masters on PORT,
# PORT+1 and PORT+2 (no replicas), each a redis instance under
# DIR/node-PORT, and creates the cluster on first start. Full slot coverage
# is not required, so a dead master (`kill redis DIR/node-PORT`) fails only
# the keys in its slots. `stop` and `kill` of redis-cluster act on the three.
#
# The destinations besides HTTP (issue 27): the customers' own brokers.
# `start nats PORT DIR`: Debian's nats-server with JetStream (its store in
#   DIR/jetstream), user hookpipe, password hookpipe-secret:
#   nats://hookpipe:hookpipe-secret@127.0.0.1:PORT
# `start rabbitmq PORT DIR`: Debian's rabbitmq-server (no plugins), node
#   hookpipe-PORT@localhost, user hookpipe, password hookpipe-secret:
#   127.0.0.1:PORT     AMQP 0-9-1
#   127.0.0.1:PORT+1   Erlang distribution (rabbitmqctl)
#   127.0.0.1:PORT+2   an epmd of its own, stopped with the node
#   Its Erlang cookie is DIR/.erlang.cookie (HOME=DIR), its mnesia, logs and
#   config under DIR, so instances never share anything; it runs as whoever
#   starts it, root included. For rabbitmqctl: `services.sh ctl DIR ARGS...`.
# `start elasticmq PORT DIR`: ElasticMQ, an SQS-compatible server (both
#   the JSON and the query protocol), from the jars `install-elasticmq`
#   fetches from Maven Central into .build/elasticmq-VERSION (java 17+, mvn),
#   each checked against pipeline/scripts/elasticmq.sha256. Endpoint
#   http://127.0.0.1:PORT, region us-east-1, account 000000000000, any
#   credentials; queues (DIR/queues.conf) and messages (DIR/messages*.db)
#   kept on disk, so a restart on the same DIR finds them again; with
#   ELASTICMQ_STORAGE=memory in memory only (faster: make test's shared one).
# `installed SERVICE` succeeds if `start SERVICE` has what it needs.
set -euo pipefail

PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin
PROG=${0##*/}

REDIS_START_TIMEOUT=${REDIS_START_TIMEOUT:-20}
CLICKHOUSE_START_TIMEOUT=${CLICKHOUSE_START_TIMEOUT:-60}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-90}
NATS_START_TIMEOUT=${NATS_START_TIMEOUT:-20}
# RabbitMQ boots in 5-10 s on a quiet machine (the Erlang VM, then mnesia
# and every boot step); a loaded CI machine may take several times that.
RABBITMQ_START_TIMEOUT=${RABBITMQ_START_TIMEOUT:-120}
ELASTICMQ_START_TIMEOUT=${ELASTICMQ_START_TIMEOUT:-60}
# disk: ElasticMQ keeps queues and messages under DIR (a restart finds
# them); memory: it keeps nothing, and takes messages 3-4 times as fast
# (each one on disk is a commit of H2's).
ELASTICMQ_STORAGE=${ELASTICMQ_STORAGE:-disk}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}

# The Kafka release `install-kafka` fetches, and the SHA-256 of its
# kafka_2.13-$KAFKA_VERSION.jar (checked after the fetch, on top of Maven's
# --strict-checksums). Kafka logs through slf4j 1.x; the release tarball
# binds it to log4j2, which the Maven artifacts leave out: added here.
KAFKA_VERSION=4.4.0
KAFKA_JAR_SHA256=76d3314f873571677ff98620ab9a431e508e3687f921a3df4f70d692a970475e
KAFKA_LOG4J_VERSION=2.25.4
SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$SCRIPTS/../.." && pwd -P)
KAFKA_CACHE=$ROOT/.build/kafka-$KAFKA_VERSION

# The ElasticMQ release `install-elasticmq` fetches; the SHA-256 of every
# jar it runs on (its dependencies resolved by Maven, pinned here so that
# a changed POM cannot bring in another jar unnoticed) is in
# elasticmq.sha256 beside this script.
ELASTICMQ_VERSION=1.7.1
ELASTICMQ_CACHE=$ROOT/.build/elasticmq-$ELASTICMQ_VERSION

# Debian's /usr/sbin/rabbitmq-server switches to the rabbitmq user when
# started as root, which could not write a DIR of root's: the script it
# wraps runs as whoever calls it.
RABBITMQ_SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server
RABBITMQ_CTL=/usr/lib/rabbitmq/bin/rabbitmqctl

# The user and password of the NATS and RabbitMQ test servers.
QUEUE_USER=hookpipe
QUEUE_PASS=hookpipe-secret

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
  $PROG install-kafka          fetch Kafka $KAFKA_VERSION from Maven Central (slow, once)
  $PROG install-elasticmq      fetch ElasticMQ $ELASTICMQ_VERSION from Maven Central (once)
  $PROG installed SERVICE      succeed if SERVICE can be started
  $PROG start redis PORT DIR
  $PROG start redis-cluster PORT DIR  three masters on PORT, PORT+1, PORT+2
  $PROG start clickhouse TCPPORT HTTPPORT DIR
  $PROG start kafka PORT DIR   PLAINTEXT on PORT, SASL_SSL on PORT+1, controller on PORT+2
  $PROG start nats PORT DIR    JetStream enabled
  $PROG start rabbitmq PORT DIR  AMQP on PORT, distribution on PORT+1, epmd on PORT+2
  $PROG start elasticmq PORT DIR
  $PROG stop SERVICE DIR
  $PROG kill SERVICE DIR
  $PROG ctl DIR ARGS...        rabbitmqctl ARGS against the node of DIR
  $PROG kafka-requests DIR JMXPORT  requests the broker of DIR served, by API (JMX on JMXPORT)
  $PROG status
SERVICE: redis|redis-cluster|clickhouse|kafka|nats|rabbitmq|elasticmq
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

# await_up TIMEOUT_VAR PING PORT ALIVE...: wait up to $TIMEOUT_VAR seconds
# for PING PORT to succeed. Gives up early once the command ALIVE... fails,
# the server having died (port taken, bad config...); not in the first two
# seconds, as a daemon writes its pid file itself. On failure, prints why.
await_up() {
	local timeout_var=$1 ping=$2 port=$3 start=$SECONDS
	shift 3
	while ((SECONDS - start < ${!timeout_var})); do
		"$ping" "$port" && return 0
		if ((SECONDS - start >= 2)) && ! "$@"; then
			echo "exited during startup"
			return 1
		fi
		sleep 0.25
	done
	echo "did not answer within ${!timeout_var}s ($timeout_var)"
	return 1
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
	# For the official AsyncAPI parser (make asyncapi-validator).
	have node || need+=(nodejs)
	have npm || need+=(npm)
	# For the Apache Kafka broker (install-kafka, start kafka).
	have java || need+=(openjdk-17-jre-headless)
	have mvn || need+=(maven)
	# The customers' own brokers of issue 27's destinations (ElasticMQ, the
	# SQS one, is fetched by install-elasticmq).
	have nats-server || need+=(nats-server)
	[[ -x $RABBITMQ_SERVER ]] || need+=(rabbitmq-server)

	if ((${#need[@]} == 0)); then
		log "install: redis-server, clickhouse-server, clickhouse-client, kcat, chromium, curl, node, npm, java, mvn, nats-server and rabbitmq-server are already installed"
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
	for c in redis-server redis-cli clickhouse-server clickhouse-client kcat chromium curl openssl node npm java mvn nats-server; do
		have "$c" || die "install: $c still missing after apt-get install"
	done
	[[ -x $RABBITMQ_SERVER ]] || die "install: $RABBITMQ_SERVER still missing after apt-get install"
	log "install: done"
}

# ---------------------------------------------------------------- redis

redis_ping() {
	local port=$1
	# timeout: a non-redis listener (e.g. an HTTP port) would never answer.
	[[ $(timeout 3 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]
}

# start_redis PORT DIR [ARG...]: ARGs are passed to redis-server.
start_redis() {
	(($# >= 2)) || usage
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
			"${@:3}" \
			</dev/null
	fi

	local why
	if why=$(await_up REDIS_START_TIMEOUT redis_ping "$port" pid_alive "$pidfile" redis-server); then
		log "redis up on 127.0.0.1:$port (dir $dir)"
		return 0
	fi
	log "redis on 127.0.0.1:$port $why; last log lines:"
	tail -n 20 -- "$logfile" >&2 || true
	exit 1
}

cluster_ok() {
	[[ $(timeout 3 redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null) == *cluster_state:ok* ]]
}

start_redis_cluster() {
	(($# == 2)) || usage
	local port=$1 dir p
	check_port "$port"
	check_port $((port + 2))
	have redis-cli || die "redis-cli not found; run: $PROG install"
	dir=$(abs_dir "$2")
	for p in "$port" $((port + 1)) $((port + 2)); do
		# nodes.conf under the node's dir: a node killed and started
		# again rejoins with its slots.
		start_redis "$p" "$dir/node-$p" --cluster-enabled yes --cluster-config-file nodes.conf \
			--cluster-node-timeout 2000 --cluster-require-full-coverage no
	done
	if [[ $(timeout 3 redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null) == *cluster_slots_assigned:0* ]]; then
		timeout 30 redis-cli --cluster create 127.0.0.1:"$port" 127.0.0.1:$((port + 1)) 127.0.0.1:$((port + 2)) \
			--cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 ||
			{
				log "redis-cli --cluster create failed:"
				tail -n 20 -- "$dir/create.log" >&2
				exit 1
			}
	fi
	local start=$SECONDS
	while ((SECONDS - start < REDIS_START_TIMEOUT)); do
		if cluster_ok "$port" && cluster_ok $((port + 1)) && cluster_ok $((port + 2)); then
			log "redis cluster up on 127.0.0.1:$port-$((port + 2)) (dir $dir)"
			return 0
		fi
		sleep 0.25
	done
	log "redis cluster on 127.0.0.1:$port-$((port + 2)) not ok within ${REDIS_START_TIMEOUT}s:"
	timeout 3 redis-cli -h 127.0.0.1 -p "$port" cluster info >&2 || true
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

	local why
	if why=$(await_up CLICKHOUSE_START_TIMEOUT clickhouse_ping "$tcp" pid_alive "$pidfile" "$dir/config.xml"); then
		log "clickhouse up on 127.0.0.1:$tcp (http $http, dir $dir)"
		return 0
	fi
	log "clickhouse on 127.0.0.1:$tcp $why; last log lines:"
	tail -n 20 -- "$dir/log/stdout.log" "$dir/log/clickhouse-server.err.log" >&2 2>/dev/null || true
	exit 1
}

# ---------------------------------------------------------------- kafka

# maven_install CMD CACHE NAME VERSION CHECK: fetch from Maven Central the
# jars of NAME VERSION (the POM's <dependency> elements on stdin, with all
# they depend on at runtime) into CACHE/libs and run CHECK LIBS on them,
# unless a previous run completed (the marker file is written last, after
# CHECK). A lock keeps parallel callers (test packages) from fetching into
# the same place; CMD names the command in the messages.
maven_install() {
	local cmd=$1 cache=$2 name=$3 version=$4 check=$5
	local libs=$cache/libs marker=$cache/installed lock deps
	deps=$(cat)
	mkdir -p -- "$cache"
	exec {lock}>"$cache/.lock"
	flock "$lock"
	if [[ -e $marker ]]; then
		log "$cmd: $name $version already in $libs"
		return 0
	fi
	have java || die "java not found; install OpenJDK 17+ (apt-get install openjdk-17-jre-headless)"
	have mvn || die "mvn not found; install Maven (apt-get install maven)"

	log "$cmd: fetching $name $version and its dependencies from Maven Central"
	rm -rf -- "$libs" "$cache/m2"
	cat >"$cache/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.hookpipe</groupId>
  <artifactId>${cmd#install-}-libs</artifactId>
  <version>$version</version>
  <packaging>pom</packaging>
  <dependencies>
$deps
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.8.1</version>
        <configuration>
          <includeScope>runtime</includeScope>
          <outputDirectory>$libs</outputDirectory>
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>
EOF
	# A repository of its own: the fetch does not depend on (nor fill)
	# ~/.m2; it is dropped once the jars are copied.
	mvn -B --strict-checksums -f "$cache/pom.xml" -Dmaven.repo.local="$cache/m2" \
		dependency:copy-dependencies >"$cache/mvn.log" 2>&1 || {
		tail -n 30 -- "$cache/mvn.log" >&2
		die "$cmd: mvn failed (log: $cache/mvn.log)"
	}
	rm -rf -- "$cache/m2"

	"$check" "$libs"
	touch -- "$marker"
	log "$cmd: $name $version in $libs"
}

# install_kafka: fetch the Kafka jars into $KAFKA_CACHE/libs.
# kafka-tools holds the admin tools (TopicCommand, ConfigCommand...);
# connect-runtime, which it also drags in, is only for Kafka Connect.
install_kafka() {
	maven_install install-kafka "$KAFKA_CACHE" Kafka "$KAFKA_VERSION" check_kafka_jar <<EOF
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
      <exclusions>
        <exclusion>
          <groupId>org.apache.kafka</groupId>
          <artifactId>connect-runtime</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>$KAFKA_LOG4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$KAFKA_LOG4J_VERSION</version>
    </dependency>
EOF
}

# check_kafka_jar LIBS: the broker's jar in LIBS has KAFKA_JAR_SHA256.
check_kafka_jar() {
	local jar=$1/kafka_2.13-$KAFKA_VERSION.jar sum
	sum=$(sha256sum <"$jar") || die "install-kafka: $jar missing"
	[[ ${sum%% *} == "$KAFKA_JAR_SHA256" ]] ||
		die "install-kafka: SHA-256 of $jar is ${sum%% *}, want $KAFKA_JAR_SHA256"
}

# kafka_ping PORT: succeed if the broker on PORT serves metadata listing
# itself (node 1), i.e. it is up and unfenced.
kafka_ping() {
	# A closed port fails at once; kcat would retry it for its whole -m 1.
	(: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null || return 1
	timeout 10 kcat -b "127.0.0.1:$1" -m 1 -L -t __nonexistent 2>/dev/null |
		grep -q "broker 1 at 127.0.0.1:$1"
}

# make_kafka_certs DIR: a CA (DIR/ca.pem, for clients) and, signed by it, a
# server certificate for 127.0.0.1 and localhost with its key
# (DIR/server.pem, read by the broker as a PEM key store). The CA key is not
# kept.
make_kafka_certs() {
	local dir=$1 tmp
	tmp=$(mktemp -d "$dir/certs.XXXXXX")
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=hookpipe test CA" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
		-keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj /CN=localhost \
		-keyout "$tmp/server.key" -out "$tmp/server.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$tmp/ext"
	openssl x509 -req -days 3650 -set_serial "0x$(openssl rand -hex 16)" -extfile "$tmp/ext" \
		-in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -out "$tmp/server.crt" 2>/dev/null
	cat "$tmp/server.key" "$tmp/server.crt" >"$tmp/server.pem"
	chmod 600 "$tmp/server.pem"
	mv -- "$tmp/server.pem" "$dir/server.pem"
	mv -- "$tmp/ca.pem" "$dir/ca.pem"
	rm -rf -- "$tmp"
}

write_kafka_config() {
	local port=$1 dir=$2
	cat >"$dir/server.properties" <<EOF
# Generated by $PROG on every start: a single-node test broker.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$((port + 2))
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$((port + 1)),CONTROLLER://127.0.0.1:$((port + 2))
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$((port + 1))
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location=$dir/server.pem
log.dirs=$dir/data
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1
group.initial.rebalance.delay.ms=0
# The tests run consumer groups with sessions of 2 s (the default minimum
# is 6 s); production brokers keep theirs.
group.min.session.timeout.ms=1000
# After a crash (kill), the restarted broker cannot register until the
# controller has expired the dead incarnation's session (default 9 s).
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
EOF
	cat >"$dir/log4j2.properties" <<'EOF'
appender.out.type=Console
appender.out.name=out
appender.out.layout.type=PatternLayout
appender.out.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=INFO
rootLogger.appenderRef.out.ref=out
EOF
}

# kafka_requests DIR JMXPORT: the requests the broker of DIR has served since
# it started, one "API COUNT" a line (its RequestsPerSec counts, every
# version summed), for the benchmarks. The first call starts the JVM's JMX
# agent on 127.0.0.1:JMXPORT (jcmd, from the JDK); later calls reuse it.
kafka_requests() {
	(($# == 2)) || usage
	local dir port=$2 pid
	dir=$(abs_dir "$1")
	have jcmd || die "jcmd not found; install a JDK 17+ (apt-get install openjdk-17-jdk-headless)"
	pid=$(tr -dc 0-9 <"$dir/kafka.pid") || die "no broker in $dir"
	if [[ $(cat "$dir/jmx.port" 2>/dev/null) != "$port" ]]; then
		jcmd "$pid" ManagementAgent.start "jmxremote.port=$port" "jmxremote.rmi.port=$port" \
			jmxremote.host=127.0.0.1 jmxremote.authenticate=false jmxremote.ssl=false >/dev/null ||
			die "could not start the JMX agent of the broker in $dir"
		echo "$port" >"$dir/jmx.port"
	fi
	java -cp "$KAFKA_CACHE/libs/*" org.apache.kafka.tools.JmxTool --one-time true \
		--jmx-url "service:jmx:rmi:///jndi/rmi://127.0.0.1:$port/jmxrmi" \
		--object-name 'kafka.network:type=RequestMetrics,name=RequestsPerSec,*' \
		--attributes Count --report-format properties 2>/dev/null |
		grep -o 'request=[A-Za-z]*,version=[0-9]*:Count=[0-9]*' |
		awk -F'[=,:]' '{n[$2] += $6} END {for (k in n) print k, n[k]}' | sort
}

start_kafka() {
	(($# == 2)) || usage
	local port=$1 dir
	check_port "$port"
	check_port $((port + 2))
	[[ -e $KAFKA_CACHE/installed ]] || die "Kafka $KAFKA_VERSION not installed; run: $PROG install-kafka"
	have java || die "java not found; install OpenJDK 17+"
	have kcat || die "kcat not found; run: $PROG install"
	have openssl || die "openssl not found; run: $PROG install"
	dir=$(abs_dir "$2")

	if kafka_ping "$port"; then
		log "kafka already answering on 127.0.0.1:$port"
		return 0
	fi

	# The config path names the instance in the broker's command line.
	local pidfile=$dir/kafka.pid logfile=$dir/kafka.out conf=$dir/server.properties
	if ! pid_alive "$pidfile" "$conf"; then
		rm -f -- "$pidfile" "$dir/jmx.port" # a new JVM has no JMX agent yet
		local -a java=(java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20
			-XX:+ExitOnOutOfMemoryError -XX:-UsePerfData -Djava.awt.headless=true
			-Dlog4j2.configurationFile="$dir/log4j2.properties"
			-cp "$KAFKA_CACHE/libs/*")
		[[ -s $dir/server.pem && -s $dir/ca.pem ]] || make_kafka_certs "$dir"
		write_kafka_config "$port" "$dir"
		echo "=== $PROG: start on 127.0.0.1:$port, $(date -u +%FT%TZ)" >>"$logfile"
		# Format once; a restart (after stop or kill) reuses the data.
		if [[ ! -e $dir/data/meta.properties ]]; then
			local id
			id=$(openssl rand -base64 16 | tr '+/' '-_' | tr -d '=\n')
			"${java[@]}" kafka.tools.StorageTool format --cluster-id="$id" --config "$conf" \
				--add-scram 'SCRAM-SHA-512=[name=hookpipe,password=hookpipe-secret]' \
				</dev/null >>"$logfile" 2>&1 || {
				tail -n 20 -- "$logfile" >&2
				die "kafka-storage format failed"
			}
		fi
		# No job control in a script, so setsid detaches without forking and
		# $! is the JVM's pid.
		setsid "${java[@]}" kafka.Kafka "$conf" </dev/null >>"$logfile" 2>&1 &
		echo $! >"$pidfile"
	fi

	local why
	if why=$(await_up KAFKA_START_TIMEOUT kafka_ping "$port" pid_alive "$pidfile" "$conf"); then
		log "kafka up on 127.0.0.1:$port (SASL_SSL $((port + 1)), controller $((port + 2)), dir $dir)"
		return 0
	fi
	# The cause (e.g. a port taken) is logged well before the shutdown noise
	# at the end: show this start's first errors, then its last lines.
	log "kafka on 127.0.0.1:$port $why; errors and last lines of $logfile:"
	tac -- "$logfile" | sed '/^=== /q' | tac | grep -m 5 -A 1 --no-group-separator -E '^\[[^]]*\] (ERROR|FATAL) ' >&2 || true
	tail -n 10 -- "$logfile" >&2
	exit 1
}

# ---------------------------------------------------------------- nats

# nats_ping PORT: succeed if a nats-server with JetStream answers on PORT
# (its first line, INFO, says so; nothing is sent).
nats_ping() {
	# shellcheck disable=SC2016 # $1 is the inner shell's
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && head -n 1 <&3' _ "$1" 2>/dev/null |
		grep -q '^INFO .*"jetstream":true'
}

start_nats() {
	(($# == 2)) || usage
	local port=$1 dir
	check_port "$port"
	have nats-server || die "nats-server not found; run: $PROG install"
	dir=$(abs_dir "$2")

	if nats_ping "$port"; then
		log "nats already answering on 127.0.0.1:$port"
		return 0
	fi

	# The config path names the instance in the server's command line.
	local pidfile=$dir/nats.pid logfile=$dir/nats.log conf=$dir/nats.conf
	if ! pid_alive "$pidfile" "$conf"; then
		rm -f -- "$pidfile"
		cat >"$conf" <<EOF
# Generated by $PROG on every start: a test server with JetStream.
listen: "127.0.0.1:$port"
server_name: "hookpipe-test-$port"
jetstream {
  store_dir: "$dir/jetstream"
  max_memory_store: 256MB
  max_file_store: 4GB
}
authorization {
  user: "$QUEUE_USER"
  password: "$QUEUE_PASS"
}
EOF
		echo "=== $PROG: start on 127.0.0.1:$port, $(date -u +%FT%TZ)" >>"$logfile"
		setsid nats-server -c "$conf" </dev/null >>"$logfile" 2>&1 &
		echo $! >"$pidfile"
	fi

	local why
	if why=$(await_up NATS_START_TIMEOUT nats_ping "$port" pid_alive "$pidfile" "$conf"); then
		log "nats up on 127.0.0.1:$port (JetStream in $dir/jetstream)"
		return 0
	fi
	log "nats on 127.0.0.1:$port $why; last lines of $logfile:"
	tail -n 20 -- "$logfile" >&2
	exit 1
}

# ---------------------------------------------------------------- rabbitmq

# rabbitmq_ping PORT: succeed if RabbitMQ answers an AMQP 0-9-1 protocol
# header on PORT with its Connection.Start (which names the product). The
# listener opens only once the node has booted.
rabbitmq_ping() {
	# shellcheck disable=SC2016 # $1 is the inner shell's
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "AMQP\0\0\011\001" >&3 && dd bs=4096 count=1 <&3 2>/dev/null' _ "$1" 2>/dev/null |
		grep -aq RabbitMQ
}

# rabbitmq_env DIR PORT: the environment of the node of DIR, for the server
# and for rabbitmqctl (which finds the node through the same epmd and
# cookie).
rabbitmq_env() {
	local dir=$1 port=$2
	echo HOME="$dir" \
		RABBITMQ_NODENAME="hookpipe-$port@localhost" \
		RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		RABBITMQ_NODE_PORT="$port" \
		RABBITMQ_DIST_PORT=$((port + 1)) \
		ERL_EPMD_PORT=$((port + 2)) \
		ERL_EPMD_ADDRESS=127.0.0.1 \
		RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" \
		RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" \
		RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
		RABBITMQ_MNESIA_BASE="$dir/mnesia" \
		RABBITMQ_LOG_BASE="$dir/log" \
		RABBITMQ_PID_FILE="$dir/rabbitmq.pid" \
		ERL_CRASH_DUMP="$dir/erl_crash.dump" \
		RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="'-kernel inet_dist_use_interface {127,0,0,1} -hookpipe_dir $dir'"
}

# rabbitmq_port DIR: the AMQP port of the node of DIR (from its config).
rabbitmq_port() {
	sed -n 's/^listeners\.tcp\.1 = 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$1/rabbitmq.conf" 2>/dev/null
}

start_rabbitmq() {
	(($# == 2)) || usage
	local port=$1 dir
	check_port "$port"
	check_port $((port + 2))
	[[ -x $RABBITMQ_SERVER ]] || die "rabbitmq-server not found; run: $PROG install"
	dir=$(abs_dir "$2")
	# Erlang's arguments are split at blanks.
	[[ $dir != *[[:space:]]* ]] || die "rabbitmq: DIR must not contain blanks: '$dir'"

	if rabbitmq_ping "$port"; then
		log "rabbitmq already answering on 127.0.0.1:$port"
		return 0
	fi

	# The node's command line names its DIR (-hookpipe_dir); the node
	# writes its pid file itself once booting, its launcher (a shell of
	# rabbitmq-server's that waits on it) lives as long as it does.
	local pidfile=$dir/rabbitmq.pid logfile=$dir/rabbitmq.out name="-hookpipe_dir $dir" launcher=
	if ! pid_alive "$pidfile" "$name"; then
		rm -f -- "$pidfile"
		mkdir -p -- "$dir/mnesia" "$dir/log"
		cat >"$dir/rabbitmq.conf" <<EOF
# Generated by $PROG on every start: a single test node, no plugins.
listeners.tcp.1 = 127.0.0.1:$port
default_user = $QUEUE_USER
default_pass = $QUEUE_PASS
default_vhost = /
loopback_users = none
log.console = false
log.file = rabbit.log
log.file.level = info
EOF
		: >"$dir/rabbitmq-env.conf"
		echo '[].' >"$dir/enabled_plugins"
		echo '[].' >"$dir/advanced.config"
		echo "=== $PROG: start on 127.0.0.1:$port, $(date -u +%FT%TZ)" >>"$logfile"
		# The environment as one command (eval: the extra Erlang arguments
		# hold blanks); setsid detaches the node.
		eval "setsid env $(rabbitmq_env "$dir" "$port") $RABBITMQ_SERVER" </dev/null >>"$logfile" 2>&1 &
		launcher=$!
	fi

	local start=$SECONDS why
	if why=$(await_up RABBITMQ_START_TIMEOUT rabbitmq_ping "$port" rabbitmq_alive "$launcher" "$pidfile" "$name"); then
		log "rabbitmq up on 127.0.0.1:$port after $((SECONDS - start))s (distribution $((port + 1)), epmd $((port + 2)), dir $dir)"
		return 0
	fi
	log "rabbitmq on 127.0.0.1:$port $why; last lines of $logfile and $dir/log/rabbit.log:"
	tail -n 20 -- "$logfile" "$dir/log/rabbit.log" >&2 2>/dev/null || true
	exit 1
}

# rabbitmq_alive LAUNCHER PIDFILE NAME: succeed while the node lives: its
# LAUNCHER if this start launched it, else the node PIDFILE names.
rabbitmq_alive() {
	if [[ -n $1 ]]; then
		kill -0 "$1" 2>/dev/null
	else
		pid_alive "$2" "$3"
	fi
}

# stop_epmd DIR: stop the epmd of the node of DIR, once the node is gone.
stop_epmd() {
	local port
	port=$(rabbitmq_port "$1")
	[[ -n $port ]] || return 0
	ERL_EPMD_PORT=$((port + 2)) epmd -kill >/dev/null 2>&1 || true
}

# rabbitmq_ctl DIR ARGS...: rabbitmqctl against the node of DIR.
rabbitmq_ctl() {
	(($# >= 1)) || usage
	local dir port
	dir=$(cd -- "$1" && pwd -P) || die "no such DIR: $1"
	shift
	port=$(rabbitmq_port "$dir")
	[[ -n $port ]] || die "no rabbitmq config in $dir"
	eval "env $(rabbitmq_env "$dir" "$port") $RABBITMQ_CTL \"\$@\""
}

# ---------------------------------------------------------------- elasticmq

# install_elasticmq: fetch the ElasticMQ jars into $ELASTICMQ_CACHE/libs.
install_elasticmq() {
	maven_install install-elasticmq "$ELASTICMQ_CACHE" ElasticMQ "$ELASTICMQ_VERSION" check_elasticmq_jars <<EOF
    <dependency>
      <groupId>org.elasticmq</groupId>
      <artifactId>elasticmq-server_2.13</artifactId>
      <version>$ELASTICMQ_VERSION</version>
    </dependency>
EOF
}

# check_elasticmq_jars LIBS: LIBS holds exactly the jars of
# elasticmq.sha256, each with its pinned SHA-256.
check_elasticmq_jars() {
	local libs=$1 sums=$SCRIPTS/elasticmq.sha256
	(cd -- "$libs" && sha256sum --quiet --strict -c "$sums") >&2 ||
		die "install-elasticmq: a jar in $libs differs from $sums"
	diff <(sed 's/^[0-9a-f]*  //' "$sums" | sort) <(cd -- "$libs" && printf '%s\n' * | sort) >&2 ||
		die "install-elasticmq: the jars in $libs (>) are not those of $sums (<)"
}

# elasticmq_ping PORT: succeed if an SQS endpoint answers ListQueues on PORT.
elasticmq_ping() {
	curl -fsS -m 3 -o /dev/null "http://127.0.0.1:$1/?Action=ListQueues" 2>/dev/null
}

start_elasticmq() {
	(($# == 2)) || usage
	local port=$1 dir
	check_port "$port"
	[[ -e $ELASTICMQ_CACHE/installed ]] || die "ElasticMQ $ELASTICMQ_VERSION not installed; run: $PROG install-elasticmq"
	have java || die "java not found; install OpenJDK 17+"
	have curl || die "curl not found; run: $PROG install"
	dir=$(abs_dir "$2")

	if elasticmq_ping "$port"; then
		log "elasticmq already answering on 127.0.0.1:$port"
		return 0
	fi

	# The config path names the instance in the server's command line.
	local pidfile=$dir/elasticmq.pid logfile=$dir/elasticmq.out conf=$dir/elasticmq.conf
	if ! pid_alive "$pidfile" "$conf"; then
		rm -f -- "$pidfile"
		# HOCON: the jar's defaults (application.conf), then ours.
		cat >"$conf" <<EOF
# Generated by $PROG on every start: an SQS endpoint for the tests.
include classpath("application.conf")
node-address { protocol = "http", host = "127.0.0.1", port = $port, context-path = "" }
rest-sqs { enabled = true, bind-port = $port, bind-hostname = "127.0.0.1", sqs-limits = strict }
generate-node-address = false
aws { region = "us-east-1", accountId = "000000000000" }
EOF
		case $ELASTICMQ_STORAGE in
		disk)
			# H2 commits each change at once (WRITE_DELAY=0): with its
			# default delay a message sent just before a SIGKILL is lost.
			cat >>"$conf" <<EOF
queues-storage { enabled = true, path = "$dir/queues.conf" }
messages-storage { enabled = true, uri = "jdbc:h2:$dir/messages;WRITE_DELAY=0" }
EOF
			;;
		memory) ;;
		*) die "ELASTICMQ_STORAGE=$ELASTICMQ_STORAGE: want disk or memory" ;;
		esac
		echo "=== $PROG: start on 127.0.0.1:$port, $(date -u +%FT%TZ)" >>"$logfile"
		setsid java -Xms64m -Xmx512m -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError -XX:-UsePerfData \
			-Djava.awt.headless=true -Dconfig.file="$conf" \
			-cp "$ELASTICMQ_CACHE/libs/*" org.elasticmq.server.Main </dev/null >>"$logfile" 2>&1 &
		echo $! >"$pidfile"
	fi

	local why
	if why=$(await_up ELASTICMQ_START_TIMEOUT elasticmq_ping "$port" pid_alive "$pidfile" "$conf"); then
		log "elasticmq up on 127.0.0.1:$port (dir $dir)"
		return 0
	fi
	log "elasticmq on 127.0.0.1:$port $why; last lines of $logfile:"
	tail -n 20 -- "$logfile" >&2
	exit 1
}

# ---------------------------------------------------------------- stop

# stop_service TERM|KILL SVC DIR: TERM stops the instance (SIGTERM, then
# SIGKILL after STOP_TIMEOUT); KILL sends SIGKILL straight away.
stop_service() {
	(($# == 3)) || usage
	local sig=$1 svc=$2 dir=$3 pidfile name node
	case $svc in
	redis) pidfile=$dir/redis.pid name=redis-server ;;
	redis-cluster)
		local nodes=0
		for node in "$dir"/node-*/; do
			[[ -d $node ]] || continue
			stop_service "$sig" redis "${node%/}"
			nodes=1
		done
		((nodes)) || log "no redis cluster nodes in $dir"
		return 0
		;;
	clickhouse) pidfile=$dir/clickhouse-server.pid name=clickhouse-server ;;
	kafka)
		# The broker's command line names its config by absolute path.
		[[ -d $dir ]] && dir=$(cd -- "$dir" && pwd -P)
		pidfile=$dir/kafka.pid name=$dir/server.properties
		;;
	nats)
		[[ -d $dir ]] && dir=$(cd -- "$dir" && pwd -P)
		pidfile=$dir/nats.pid name=$dir/nats.conf
		;;
	rabbitmq)
		[[ -d $dir ]] && dir=$(cd -- "$dir" && pwd -P)
		pidfile=$dir/rabbitmq.pid name="-hookpipe_dir $dir"
		;;
	elasticmq)
		[[ -d $dir ]] && dir=$(cd -- "$dir" && pwd -P)
		pidfile=$dir/elasticmq.pid name=$dir/elasticmq.conf
		;;
	*) usage ;;
	esac
	signal_service "$sig" "$svc" "$dir" "$pidfile" "$name"
	# A node's epmd goes once the node is gone (stopped or killed).
	[[ $svc != rabbitmq ]] || stop_epmd "$dir"
}

# signal_service TERM|KILL SVC DIR PIDFILE NAME: stop_service's signal
# and wait.
signal_service() {
	local sig=$1 svc=$2 dir=$3 pidfile=$4 name=$5
	if ! pid_alive "$pidfile" "$name"; then
		rm -f -- "$pidfile"
		log "$svc in $dir is not running"
		return 0
	fi

	local pid i start=$SECONDS
	pid=$(read_pid "$pidfile")
	if [[ $sig == TERM ]]; then
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
	fi
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 40; i++)); do
		kill -0 "$pid" 2>/dev/null || {
			rm -f -- "$pidfile"
			log "$svc (pid $pid) killed"
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
			[[ $cmd == *'[cluster]'* ]] && state="$state cluster"
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
		nats-server)
			cmd=$(tr '\0' '\n' <"$p/cmdline" 2>/dev/null) || continue
			cfg=$(tail -n 1 <<<"$cmd")
			port=$(sed -n 's|^listen: "127.0.0.1:\([0-9]*\)"$|\1|p' "$cfg" 2>/dev/null || true)
			state=down
			[[ $port =~ ^[0-9]+$ ]] && nats_ping "$port" && state=up
			echo "nats        pid=$pid port=${port:-?} state=$state dir=${cfg%/nats.conf}"
			found=1
			;;
		beam.smp)
			cmd=$(tr '\0' '\n' <"$p/cmdline" 2>/dev/null) || continue
			cfg=$(grep -x -A 1 -- -hookpipe_dir <<<"$cmd" | tail -n 1)
			[[ -n $cfg ]] || continue
			port=$(rabbitmq_port "$cfg")
			state=down
			[[ $port =~ ^[0-9]+$ ]] && rabbitmq_ping "$port" && state=up
			echo "rabbitmq    pid=$pid port=${port:-?} state=$state dir=$cfg"
			found=1
			;;
		java)
			cmd=$(tr '\0' '\n' <"$p/cmdline" 2>/dev/null) || continue
			if grep -qx org.elasticmq.server.Main <<<"$cmd"; then
				cfg=$(sed -n 's/^-Dconfig.file=//p' <<<"$cmd")
				port=$(sed -n 's/^rest-sqs { enabled = true, bind-port = \([0-9]*\),.*/\1/p' "$cfg" 2>/dev/null || true)
				state=down
				[[ $port =~ ^[0-9]+$ ]] && elasticmq_ping "$port" && state=up
				echo "elasticmq   pid=$pid port=${port:-?} state=$state dir=${cfg%/elasticmq.conf}"
				found=1
				continue
			fi
			grep -qx kafka.Kafka <<<"$cmd" || continue
			# the broker's last argument is DIR/server.properties
			cfg=$(tail -n 1 <<<"$cmd")
			port=$(sed -n 's|^listeners=PLAINTEXT://127.0.0.1:\([0-9]*\),.*|\1|p' "$cfg" 2>/dev/null || true)
			state=down
			[[ $port =~ ^[0-9]+$ ]] && kafka_ping "$port" && state=up
			echo "kafka       pid=$pid port=${port:-?} state=$state dir=${cfg%/server.properties}"
			found=1
			;;
		*) ;;
		esac
	done
	((found)) || echo "no redis-server, clickhouse-server, kafka, nats-server, rabbitmq or elasticmq running"
}

# ---------------------------------------------------------------- installed

# installed SERVICE: succeed if `start SERVICE` has what it needs (for
# tests that skip without it when run by hand).
installed() {
	case $1 in
	redis | redis-cluster) have redis-server && have redis-cli ;;
	clickhouse) have clickhouse-server && have clickhouse-client ;;
	kafka) [[ -e $KAFKA_CACHE/installed ]] && have java && have kcat && have openssl ;;
	nats) have nats-server ;;
	rabbitmq) [[ -x $RABBITMQ_SERVER ]] && have epmd ;;
	elasticmq) [[ -e $ELASTICMQ_CACHE/installed ]] && have java && have curl ;;
	*) usage ;;
	esac
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
	install-kafka)
		(($# == 0)) || usage
		install_kafka
		;;
	install-elasticmq)
		(($# == 0)) || usage
		install_elasticmq
		;;
	start)
		(($# >= 1)) || usage
		local svc=$1
		shift
		case $svc in
		redis)
			(($# == 2)) || usage
			start_redis "$@"
			;;
		redis-cluster) start_redis_cluster "$@" ;;
		clickhouse) start_clickhouse "$@" ;;
		kafka) start_kafka "$@" ;;
		nats) start_nats "$@" ;;
		rabbitmq) start_rabbitmq "$@" ;;
		elasticmq) start_elasticmq "$@" ;;
		*) usage ;;
		esac
		;;
	installed)
		(($# == 1)) || usage
		installed "$1"
		;;
	stop) stop_service TERM "$@" ;;
	kill) stop_service KILL "$@" ;;
	ctl) rabbitmq_ctl "$@" ;;
	kafka-requests) kafka_requests "$@" ;;
	status) status ;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
