#!/usr/bin/env bash
# Installs the Debian packages the tests, benchmarks and demo need, when any is
# missing; when none is, it only asks dpkg (a few milliseconds). `make deps` runs it,
# and `make test`, `make demo` and `make bench` run `make deps` first; .ci/run too.
#
#   python3-torch         the example PyTorch trainer, tested on CPU with /usr/bin/python3
#   libopenblas0-pthread  the BLAS python3-torch uses for CPU speed (without it Debian's
#                         reference BLAS is ~40x slower); benchmarks name the BLAS
#   fortunes              /usr/share/games/fortunes: a real English corpus for tests
#   prometheus            its promtool tests the alerting rules in docs/monitoring
#                         (make test); the server itself is not started
#   libjs-chart.js        Chart.js, vendored into the dashboard's assets by `make vendor-chartjs`
#   chromium              headless Chromium for the dashboard's real-browser test (chromedp)
set -euo pipefail
packages=(python3-torch libopenblas0-pthread fortunes prometheus libjs-chart.js chromium)

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "deps: no dpkg here; install the equivalents of ${packages[*]} yourself" >&2
	exit 0
fi
missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo=(sudo -n)
	else
		echo "deps: missing Debian packages: ${missing[*]}; as root run:" >&2
		echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
fi
echo "deps: installing ${missing[*]} (apt-get update first)"
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
# Only promtool is wanted from prometheus: where the package's service was started by this
# install (a host with systemd and no policy-rc.d), stop it, since it takes port 9090, the
# node's default gRPC port.
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1 &&
	systemctl is-active --quiet prometheus 2>/dev/null; then
	echo "deps: stopping and disabling the prometheus service the package started (only promtool is used)"
	"${sudo[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
