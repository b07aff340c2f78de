#!/usr/bin/env bash
# run.sh: three scheduler replicas on one Redis, and what "once per tick"
# and "handoff on scale-in" look like from outside.
#
#   examples/replicas/run.sh [REDIS_PORT]
#
# It starts a throwaway redis-server (on REDIS_PORT, or a free port) in a
# temporary directory, builds the scheduler binary, and starts three
# replicas of it with one config, told apart by the environment:
# LOCKCRON_REPLICA_ID (replica_id), LOCKCRON_ADMIN__LISTEN (admin.listen)
# and REDIS_URL. Then:
#
#   1. for about 10 s a job appends "tick token replica attempt" to a shared
#      file every second; each tick must appear once;
#   2. a 5 s job is triggered (`scheduler trigger`); the replica running it
#      gets SIGTERM, and another replica starts the same run at once.
#
# Needs bash, Go 1.26 (https://go.dev/dl; Debian's golang-go is older) and
# redis-server (apt-get install redis-server). Everything it starts is
# stopped, and its temporary directory removed, when it exits, also on
# Ctrl-C. Takes about 20 s after the build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
replicas=3
window=10 # seconds of ticks before the handoff

command -v redis-server >/dev/null || { echo "run.sh: redis-server not found; sudo apt-get install -y redis-server" >&2; exit 1; }
command -v go >/dev/null || { echo "run.sh: go not found; see https://go.dev/doc/install" >&2; exit 1; }

# Settings from the caller's environment would override the config's (a
# LOCKCRON_REDIS__URL would win over REDIS_URL): start from none.
while read -r v; do unset "$v"; done < <(compgen -v LOCKCRON_ || true)

tmp="$(mktemp -d -t lockcron-replicas.XXXXXX)"
redis_pid=""
pids=() # pids[i] is replica-i's process
cleanup() {
	trap - EXIT INT TERM
	local pid
	for pid in "${pids[@]}"; do
		if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; fi
	done
	for pid in "${pids[@]}"; do
		if [ -n "$pid" ]; then wait "$pid" 2>/dev/null || true; fi
	done
	if [ -n "$redis_pid" ]; then
		kill -TERM "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ms() { date +%s%3N; }
say() { printf '\n== %s\n' "$*"; }
# times: "<RFC 3339 time> <log line> [replica-N]" lines, indented, with the
# time of day only, the replica after it.
times() { sed -E 's/ +/ /g; s/^[0-9-]+T([0-9:.]+)Z (.*) \[(replica-[0-9]+)\]$/      \1 \3 \2/'; }

# port_busy PORT: whether something listens on 127.0.0.1:PORT.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port VAR: sets VAR to a port nothing listens on, not handed out
# before, and below the ephemeral range (where an outgoing connection could
# hold it).
used_ports=" "
ephemeral_low=32768
read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
[ "$ephemeral_low" -gt 11000 ] || ephemeral_low=32768
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((10000 + RANDOM % (ephemeral_low - 10000)))
		if [[ $used_ports != *" $p "* ]] && ! port_busy "$p"; then
			used_ports+="$p "
			printf -v "$1" '%s' "$p"
			return 0
		fi
	done
	echo "run.sh: no free port found" >&2
	return 1
}

# redis_ping PORT: whether the redis-server there answers PING.
redis_ping() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'PING\r\n' >&3
		read -r -t 1 reply <&3 || exit 1
		[[ $reply == +PONG* ]]
	) 2>/dev/null
}

# http_status HOST:PORT PATH: the status code of a GET, or nothing.
http_status() {
	(
		exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || exit 1
		printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
		read -r -t 2 _ code _ <&3 || exit 1
		echo "$code"
	) 2>/dev/null || true
}

# per_replica FILE: how many runs of job "tick" each replica made.
per_replica() {
	local i
	printf '    runs per replica:'
	for i in $(seq "$replicas"); do
		printf ' replica-%d %d,' "$i" "$(awk -v r="replica-$i" '$3 == r' "$1" | wc -l)"
	done | sed 's/,$//'
	echo
}

# wait_for SECONDS COMMAND...: run COMMAND every 50 ms until it succeeds.
wait_for() {
	local deadline=$(($(ms) + $1 * 1000))
	shift
	until "$@"; do
		[ "$(ms)" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# --- Redis -------------------------------------------------------------------

redis_port="${1:-${REDIS_PORT:-}}"
if [ -z "$redis_port" ]; then
	free_port redis_port
elif port_busy "$redis_port"; then
	echo "run.sh: port $redis_port is in use; give another, or none for a free one" >&2
	exit 1
fi
used_ports+="$redis_port "
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$tmp" --logfile "$tmp/redis.log" &
redis_pid=$!
wait_for 5 redis_ping "$redis_port" || { echo "run.sh: redis-server did not start:" >&2; cat "$tmp/redis.log" >&2; exit 1; }
export REDIS_URL="redis://127.0.0.1:$redis_port/0"
say "redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$redis_port (pid $redis_pid), in $tmp"

# --- the scheduler and its config -----------------------------------------

say "building the scheduler: go -C cmd/scheduler build -o \$tmp/scheduler ."
(cd "$root" && go -C cmd/scheduler build -o "$tmp/scheduler" .)
scheduler="$tmp/scheduler"

ticks="$tmp/ticks.log" # one line per run of job "tick"
slow="$tmp/slow.log"   # what the runs of job "slow" do, with times
touch "$ticks" "$slow"

cat >"$tmp/tick.sh" <<'EOF'
#!/bin/sh
# Job "tick": one line per run, in the shared file.
echo "$LOCKCRON_TICK $LOCKCRON_TOKEN $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >>"$TICKS"
EOF
cat >"$tmp/slow.sh" <<'EOF'
#!/bin/sh
# Job "slow": 5 s of work; on SIGTERM (its run cancelled) it says so and stops.
log() { echo "$(date +%H:%M:%S.%3N) $LOCKCRON_REPLICA $1 run of tick $LOCKCRON_TICK, attempt $LOCKCRON_ATTEMPT" >>"$SLOW"; }
trap 'log "cancelled (SIGTERM)"; exit 143' TERM
log "started "
sleep 5 &
wait $!
log "finished"
EOF

config="$tmp/lockcron.hcl"
cat >"$config" <<EOF
# Written by examples/replicas/run.sh. Redis comes from REDIS_URL, each
# replica's name and admin address from LOCKCRON_REPLICA_ID and
# LOCKCRON_ADMIN__LISTEN.
shutdown_timeout = "10s"

telemetry {
  metrics = "none"
}

# Every second, on one replica: a line in $ticks.
job "tick" {
  schedule = "* * * * * *"
  timeout  = "900ms"
  exec {
    command = ["sh", "$tmp/tick.sh"]
    env     = { TICKS = "$ticks" }
    grace   = "1s"
  }
}

# 5 s of work. Scheduled once a year: here it runs when triggered.
job "slow" {
  schedule = "@yearly"
  exec {
    command = ["sh", "$tmp/slow.sh"]
    env     = { SLOW = "$slow" }
    grace   = "2s"
  }
}
EOF
"$scheduler" validate -config "$config" | sed 's/^/    /'

# --- three replicas --------------------------------------------------------

say "starting $replicas replicas"
declare -A admin # admin[i] is replica-i's admin address
port=""
for i in $(seq "$replicas"); do
	free_port port
	admin[$i]="127.0.0.1:$port"
	LOCKCRON_REPLICA_ID="replica-$i" LOCKCRON_ADMIN__LISTEN="${admin[$i]}" \
		"$scheduler" run -config "$config" >"$tmp/replica-$i.log" 2>&1 &
	pids[i]=$!
	echo "    replica-$i: pid ${pids[$i]}, admin http://${admin[$i]}"
done
for i in $(seq "$replicas"); do
	ready() { [ "$(http_status "${admin[$i]}" /readyz)" = 200 ]; }
	wait_for 10 ready || { echo "run.sh: replica-$i not ready:" >&2; cat "$tmp/replica-$i.log" >&2; exit 1; }
done
echo "    all $replicas answer /readyz with 200"

# --- once per tick ---------------------------------------------------------

say "$window s of job \"tick\" (every second): tick token replica attempt"
sleep "$window"
cp "$ticks" "$tmp/window.log"
head -n 4 "$tmp/window.log" | sed 's/^/    /'
echo "    ..."
n=$(wc -l <"$tmp/window.log")
distinct=$(awk '{print $1}' "$tmp/window.log" | sort -u | wc -l)
dups=$(awk '{print $1}' "$tmp/window.log" | sort | uniq -d | wc -l)
first=$(date -d "$(awk '{print $1}' "$tmp/window.log" | sort | head -n 1)" +%s)
last=$(date -d "$(awk '{print $1}' "$tmp/window.log" | sort | tail -n 1)" +%s)
echo "    runs: $n, ticks: $distinct, duplicates: $dups, missing: $((last - first + 1 - distinct))"
per_replica "$tmp/window.log"
echo "    fencing tokens grow with the ticks: $(sort -k1,1 "$tmp/window.log" | awk 'NR > 1 && $2 <= prev {bad = 1} {prev = $2} END {print bad ? "no" : "yes"}')"

# --- handoff on SIGTERM ----------------------------------------------------

say "scheduler trigger slow  (a 5 s run on one replica)"
t_trigger=$(ms)
"$scheduler" trigger slow -config "$config" 2>&1 | sed 's/^/    /'
started() { grep -q started "$slow"; }
wait_for 5 started || { echo "run.sh: job slow did not start" >&2; exit 1; }
victim=$(awk '/started/ {print $2; exit}' "$slow")
vi=${victim#replica-}
echo "    $victim runs it ($(($(ms) - t_trigger)) ms after the trigger)"

sleep 1
say "SIGTERM to $victim (pid ${pids[$vi]}) while it runs slow"
t_kill=$(ms)
kill -TERM "${pids[$vi]}"
handed() { [ "$(grep -c started "$slow")" -ge 2 ]; }
wait_for 5 handed || { echo "run.sh: no handoff:" >&2; cat "$slow" "$tmp/$victim.log" >&2; exit 1; }
status=0
wait "${pids[$vi]}" || status=$?
echo "    $victim has exited, with status $status (a clean stop), $(($(ms) - t_kill)) ms after SIGTERM"
pids[vi]=""
t_stopped=$(ms)

sed 's/^/    /' "$slow"
cut_ms=$(awk '/cancelled/ {split($1, t, ":"); print int((t[1] * 3600 + t[2] * 60 + t[3]) * 1000); exit}' "$slow")
took_ms=$(awk '/started/ {n++} n == 2 {split($1, t, ":"); print int((t[1] * 3600 + t[2] * 60 + t[3]) * 1000); exit}' "$slow")
echo "    the same run started again on $(awk '/started/ {n++} n == 2 {print $2; exit}' "$slow") $((took_ms - cut_ms)) ms after it was cancelled on $victim"

echo "    the replicas' logs about it:"
# The stopped replica's lines first, so that within one millisecond its
# handoff comes before the other's claim (sort -s keeps that order).
order="$vi"
for i in $(seq "$replicas"); do
	[ "$i" = "$vi" ] || order+=" $i"
done
for i in $order; do
	{ grep -E 'job=slow|stop requested|lockcron: stopped' "$tmp/replica-$i.log" || true; } |
		{ grep -v 'output:' || true; } | sed "s/\$/ [replica-$i]/"
done | sort -s -k1,1 | times
finished() { grep -q finished "$slow"; }
wait_for 7 finished && grep finished "$slow" | sed 's/^/    /'

# --- afterwards --------------------------------------------------------------

say "all the ticks, $(($(ms) - t_stopped)) ms after $victim stopped"
cp "$ticks" "$tmp/all.log"
dups=$(awk '{print $1}' "$tmp/all.log" | sort | uniq -d | wc -l)
echo "    runs: $(wc -l <"$tmp/all.log"), duplicates: $dups"
per_replica "$tmp/all.log"
after=$(date -u -d "@$((t_stopped / 1000 + 1))" +%Y-%m-%dT%H:%M:%SZ)
echo "    runs on $victim after its stop: $(awk -v v="$victim" -v t="$after" '$3 == v && $1 >= t' "$tmp/all.log" | wc -l)"
