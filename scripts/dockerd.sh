# scripts/dockerd.sh — a throwaway Docker engine for the tests.
#
# Sourced by scripts/test (bash), not run: it defines start_dockerd and
# stop_dockerd.
#
# start_dockerd installs Debian's docker.io and busybox-static when they are
# missing (as root), starts dockerd on temp dirs with a socket of its own and
# a bridge of its own (see dockerd_bridge_up; no iptables, no NAT, no change
# to ip_forward: containers with network reach the host's own addresses
# and nothing beyond, which is what the network escape case needs), waits until
# it answers, exports BERTH_TEST_DOCKER_HOST and stops it when the script
# exits (through scripts/test's cleanups array when it has one, else
# chained before any EXIT trap already set: a trap set later must call
# stop_dockerd itself). A BERTH_TEST_DOCKER_HOST already set is used as
# is. When the engine cannot be had, the docker tests skip, or, with
# BERTH_REQUIRE_INTEGRATION=1, the script stops with the reason.
#
# DOCKERD_WAIT (default 60) bounds, in seconds, the wait for the engine.

# dockerd_missing reports an engine the tests cannot have: fatal under
# BERTH_REQUIRE_INTEGRATION=1, else a note (the docker tests skip).
dockerd_missing() {
	if [ "${BERTH_REQUIRE_INTEGRATION:-}" = 1 ]; then
		echo "scripts/dockerd.sh: Docker is required (BERTH_REQUIRE_INTEGRATION=1) but is not available: $1" >&2
		exit 1
	fi
	echo "scripts/dockerd.sh: Docker not available ($1); its tests will skip" >&2
}

# dockerd_answers reports whether the engine at $1 (unix://PATH) answers.
dockerd_answers() {
	if command -v docker >/dev/null 2>&1; then
		docker -H "$1" version --format '{{.Server.Version}}' >/dev/null 2>&1
	else
		curl -sf --max-time 2 --unix-socket "${1#unix://}" http://localhost/_ping >/dev/null 2>&1
	fi
}

# dockerd_static_busybox reports whether /bin/busybox is statically linked
# (the docker provider builds its default image from it): ldd refuses a
# static executable.
dockerd_static_busybox() {
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1
}

# dockerd_register_cleanup makes stop_dockerd run when the script exits:
# through scripts/test's cleanups array when there is one, else chained
# before whatever EXIT trap is already set.
dockerd_register_cleanup() {
	if declare -p cleanups 2>/dev/null | grep -q '^declare -a'; then
		cleanups+=(stop_dockerd)
		return
	fi
	eval "dockerd_prev_trap=$(trap -p EXIT | sed -e 's/^trap -- //' -e 's/ EXIT$//')"
	[ -n "$dockerd_prev_trap" ] || dockerd_prev_trap=:
	trap 'stop_dockerd; eval "$dockerd_prev_trap"' EXIT
}

# dockerd_install installs the Debian packages named, with scripts/test's
# apt_install when it has one.
dockerd_install() {
	if declare -F apt_install >/dev/null; then
		apt_install "$@" || true
		return
	fi
	[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 0
	echo "== installing $* (Debian packages)"
	apt-get update -qq >/dev/null &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || true
}

# dockerd_bridge_up makes the engine's bridge: a link named berth<hex>
# with a free 10.213.x.1/24, so that throwaway engines running side by side
# never share one, nor touch a docker0. It sets dockerd_bridge_opts to the
# dockerd options that use it, or to --bridge=none when no bridge can be
# made (no CAP_NET_ADMIN, no bridge support): the network tests then skip.
dockerd_bridge_up() {
	local i x name
	for i in 1 2 3 4 5 6 7 8; do
		x=$((RANDOM % 250 + 2))
		[ -z "$(ip -4 route show "10.213.$x.0/24" 2>/dev/null)" ] || continue
		name=$(printf 'berth%04x' $((RANDOM)))
		if ip link add name "$name" type bridge 2>/dev/null; then
			if ip addr add "10.213.$x.1/24" dev "$name" && ip link set "$name" up; then
				dockerd_bridge=$name
				dockerd_bridge_opts="--bridge=$name --ip-forward=false --ip-masq=false"
				return
			fi
			ip link del "$name" 2>/dev/null
		fi
		break
	done
	dockerd_bridge_opts=--bridge=none
}

start_dockerd() {
	if [ -n "${BERTH_TEST_DOCKER_HOST:-}" ]; then
		echo "== Docker engine at $BERTH_TEST_DOCKER_HOST (given)"
		return
	fi
	if [ "$(id -u)" != 0 ]; then
		dockerd_missing "a throwaway dockerd needs root; or set BERTH_TEST_DOCKER_HOST"
		return
	fi
	local pkgs=()
	command -v dockerd >/dev/null 2>&1 || pkgs+=(docker.io)
	dockerd_static_busybox || pkgs+=(busybox-static)
	[ ${#pkgs[@]} -eq 0 ] || dockerd_install "${pkgs[@]}"
	if ! command -v dockerd >/dev/null 2>&1; then
		dockerd_missing "no dockerd (install the docker.io package)"
		return
	fi
	if ! dockerd_static_busybox; then
		dockerd_missing "no static /bin/busybox (install the busybox-static package)"
		return
	fi
	dockerd_dir=$(mktemp -d /tmp/berth-dockerd.XXXXXX)
	local host="unix://$dockerd_dir/docker.sock"
	dockerd_bridge_up
	# setsid: its own session and group, which stop_dockerd signals whole.
	# shellcheck disable=SC2086 # the bridge options are a list
	setsid dockerd \
		--data-root "$dockerd_dir/data" --exec-root "$dockerd_dir/exec" \
		--pidfile "$dockerd_dir/dockerd.pid" -H "$host" \
		--iptables=false $dockerd_bridge_opts --log-level=warn \
		>"$dockerd_dir/log" 2>&1 </dev/null &
	dockerd_pid=$!
	dockerd_register_cleanup
	local waited=0 limit=$(( ${DOCKERD_WAIT:-60} * 5 ))
	until dockerd_answers "$host"; do
		if ! kill -0 "$dockerd_pid" 2>/dev/null; then
			tail -n 20 "$dockerd_dir/log" >&2
			stop_dockerd
			dockerd_missing "the throwaway dockerd exited"
			return
		fi
		waited=$((waited + 1))
		if [ "$waited" -ge "$limit" ]; then
			tail -n 20 "$dockerd_dir/log" >&2
			stop_dockerd
			dockerd_missing "the throwaway dockerd did not answer within ${DOCKERD_WAIT:-60}s"
			return
		fi
		sleep 0.2
	done
	export BERTH_TEST_DOCKER_HOST="$host"
	echo "== Docker $(dockerd --version | awk '{print $3}' | tr -d ,) at $host"
}

# stop_dockerd stops the engine start_dockerd started (SIGTERM to its group,
# SIGKILL after 20s), kills what it left running from its directory (its
# containerd and shims live in sessions of their own), unmounts what is
# left mounted there and removes the directory. Safe to call twice.
stop_dockerd() {
	[ -n "${dockerd_dir:-}" ] || return 0
	if [ -n "${dockerd_pid:-}" ] && kill -0 "$dockerd_pid" 2>/dev/null; then
		kill -TERM -- "-$dockerd_pid" 2>/dev/null || true
		local i
		for i in $(seq 1 100); do
			kill -0 "$dockerd_pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL -- "-$dockerd_pid" 2>/dev/null || true
	fi
	wait "$dockerd_pid" 2>/dev/null || true
	local f pid left
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		left=
		for f in /proc/[0-9]*/cmdline; do
			pid=${f#/proc/}
			pid=${pid%/cmdline}
			[ "$pid" != "$$" ] || continue
			case "$(tr '\0' ' ' 2>/dev/null <"$f")" in
			*"$dockerd_dir"*) kill -KILL "$pid" 2>/dev/null && left=1 ;;
			esac
		done
		[ -n "$left" ] || break
		sleep 0.2
	done
	awk -v d="$dockerd_dir" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$dockerd_dir"
	[ -z "${dockerd_bridge:-}" ] || ip link del "$dockerd_bridge" 2>/dev/null || true
	unset BERTH_TEST_DOCKER_HOST dockerd_dir dockerd_pid dockerd_bridge dockerd_bridge_opts
}
