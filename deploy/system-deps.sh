#!/usr/bin/env bash
# Installs the system packages logflume's demo, tests and benchmarks use, only when
# missing, so that `make up` / `make test` work on a fresh Debian machine.
#   java (Spark), kcat (interoperability tests), zookeeper (cluster), redis-server
#   and syslog-ng (peer benchmarks), netcat (the `nc -u` examples), mount and
#   e2fsprogs (the disk-full tests mount a small tmpfs, or a loop ext4 image).
set -euo pipefail

declare -A wanted=(
  [java]=openjdk-17-jre-headless
  [kcat]=kcat
  [npm]=npm  # Node.js clients of the interoperability tests (the machine image brings Node 20)
  [go]=golang-go  # the Go client of the interoperability tests, kafka-go as Debian packages it
  [/usr/share/gocode/src/github.com/segmentio/kafka-go]=golang-github-segmentio-kafka-go-dev
  [nc]=netcat-openbsd
  [ip]=iproute2
  [/usr/sbin/iptables]=iptables
  [redis-server]=redis-server
  [redis-benchmark]=redis-tools
  [shellcheck]=shellcheck
  [chromium]=chromium  # the web console's tests render its page in headless Chromium
  [chromedriver]=chromium-driver
  [man]=man-db  # the tests render `logflume manpage`
  [/usr/sbin/logrotate]=logrotate  # the tail source's copytruncate test runs the real one
  [/usr/sbin/nginx]=nginx-light  # the fleet lab: every web host runs a real nginx
  # promtool checks deploy/monitoring's alert rules and scrape config. The package
  # also holds the Prometheus server, which its postinst does not start in a
  # container (policy-rc.d forbids it, or invoke-rc.d finds no runlevel); on a host
  # booted with systemd it is enabled and started (port 9090), like redis-server.
  [promtool]=prometheus
  [/usr/bin/python3.11]=python3.11  # the agent .deb runs on Debian's Python (deploy/deb)
  [/usr/lib/python3.11/ensurepip/__main__.py]=python3.11-venv
  [dpkg-deb]=dpkg
  [groff]=groff-base
  [systemd-analyze]=systemd
  [/usr/sbin/syslog-ng]=syslog-ng-core
  [/usr/bin/mount]=mount
  [/usr/sbin/mkfs.ext4]=e2fsprogs
  [/usr/share/zookeeper/bin/zkServer.sh]=zookeeper
  [/usr/lib/syslog-ng/3.38/libkafka.so]=syslog-ng-mod-rdkafka  # Debian 12's module dir
)

missing=()
for cmd in "${!wanted[@]}"; do
  if [[ $cmd == /* ]]; then
    [ -e "$cmd" ] || missing+=("${wanted[$cmd]}")  # a package with no command on PATH
  else
    command -v "$cmd" >/dev/null 2>&1 || missing+=("${wanted[$cmd]}")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
