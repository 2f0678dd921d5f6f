#!/usr/bin/env bash
# Prints the path of Debian's kubectl (package kubernetes-client), extracting it into the user
# cache the first time. The `up` test drives restartbed with it, as a user with a distribution's
# kubectl would; it is unpacked rather than installed so that another kubectl on the machine is
# left alone. KUBECTL, when set, wins and nothing is fetched.
set -euo pipefail
if [[ -n "${KUBECTL:-}" ]]; then echo "$KUBECTL"; exit 0; fi
cache="${XDG_CACHE_HOME:-$HOME/.cache}/restartbed/debian-kubectl"
if [[ -x "$cache/usr/bin/kubectl" ]]; then echo "$cache/usr/bin/kubectl"; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
if ! apt-get download kubernetes-client >/dev/null 2>&1; then
	apt-get update >/dev/null 2>&1 || true
	apt-get download kubernetes-client >/dev/null 2>&1 || {
		echo "hack/debian-kubectl.sh: cannot download Debian's kubernetes-client package with apt-get" >&2
		exit 1
	}
fi
mkdir -p "$cache.tmp"
dpkg -x kubernetes-client_*.deb "$cache.tmp"
rm -rf "$cache" && mv "$cache.tmp" "$cache"
echo "$cache/usr/bin/kubectl"
