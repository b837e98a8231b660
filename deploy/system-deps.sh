#!/usr/bin/env bash
# Installs the Debian packages of the named sets, only those missing, so that the make
# targets work on a fresh Debian 12 machine. None of them is needed on production hosts.
#
#   deploy/system-deps.sh [up] [test] [bench]     (no set named: all three)
#
#   up     `make up`, the demo: Java for its Spark job, netcat for `nc -u`, kcat.
#   test   `make test` and `make soak`: the demo's set, and what the suite runs besides
#          (ZooKeeper, Node.js and Go Kafka clients, headless Chromium, promtool, nginx,
#          logrotate, the tools of the fleet lab's network namespaces, the .deb's
#          Debian Python, zsh for the completion tests, ...).
#   bench  `make bench`: what the benchmarks run (Java, kcat, ZooKeeper, the fleet lab)
#          and the peers they are measured against (Redis, syslog-ng with its Kafka
#          module).
set -euo pipefail

# command on PATH, or a file the package installs (a path), -> Debian package
declare -A wanted=()

want_up() {
  wanted[java]=openjdk-17-jre-headless  # the demo's near-real-time Spark job
  wanted[nc]=netcat-openbsd             # `echo hello | nc -u -w1 127.0.0.1 8285`
  wanted[kcat]=kcat                     # any Kafka client works: the README's examples
}

want_test() {
  want_up  # the tests run the demo, Spark, nc and kcat too
  wanted[/usr/share/zookeeper/bin/zkServer.sh]=zookeeper  # clusters, `logflume up --cluster`
  wanted[npm]=npm  # Node.js clients of the interoperability tests (the machine image brings Node 20)
  wanted[go]=golang-go  # the Go client of the interoperability tests, kafka-go as Debian packages it
  wanted[/usr/share/gocode/src/github.com/segmentio/kafka-go]=golang-github-segmentio-kafka-go-dev
  wanted[ip]=iproute2  # the fleet lab and network-partition tests: network namespaces
  wanted[/usr/sbin/iptables]=iptables
  wanted[/usr/sbin/nginx]=nginx-light  # the fleet lab: every web host runs a real nginx
  wanted[/usr/sbin/logrotate]=logrotate  # the tail source's copytruncate test runs the real one
  wanted[shellcheck]=shellcheck
  wanted[chromium]=chromium  # the web console's tests render its page in headless Chromium
  wanted[chromedriver]=chromium-driver
  wanted[man]=man-db  # the tests render `logflume manpage`
  wanted[groff]=groff-base
  wanted[zsh]=zsh  # the tests drive `logflume completion zsh` in a real zsh (bash is Debian's own)
  # promtool checks deploy/monitoring's alert rules and scrape config. The package
  # also holds the Prometheus server, which its postinst does not start in a
  # container (policy-rc.d forbids it, or invoke-rc.d finds no runlevel); on a host
  # booted with systemd it is enabled and started (port 9090).
  wanted[promtool]=prometheus
  wanted[/usr/bin/python3.11]=python3.11  # the agent .deb runs on Debian's Python (deploy/deb)
  wanted[/usr/lib/python3.11/ensurepip/__main__.py]=python3.11-venv
  wanted[dpkg-deb]=dpkg
  wanted[systemd-analyze]=systemd  # checks the units of deploy/
  # the disk-full tests mount a small tmpfs, or a loop ext4 image
  wanted[/usr/bin/mount]=mount
  wanted[/usr/sbin/mkfs.ext4]=e2fsprogs
}

want_bench() {
  wanted[java]=openjdk-17-jre-headless  # the Spark benchmarks
  wanted[kcat]=kcat  # a consumer beside confluent-kafka's
  wanted[/usr/share/zookeeper/bin/zkServer.sh]=zookeeper  # the cluster benchmarks
  # the fleet lab (bench_fleet) and the network-partition benchmark
  wanted[ip]=iproute2
  wanted[/usr/sbin/iptables]=iptables
  wanted[/usr/sbin/nginx]=nginx-light
  wanted[/usr/sbin/logrotate]=logrotate
  wanted[/usr/bin/python3.11]=python3.11
  wanted[/usr/lib/python3.11/ensurepip/__main__.py]=python3.11-venv
  wanted[openssl]=openssl  # bench_tls: the cipher's floor (openssl speed)
  # the peers
  wanted[redis-server]=redis-server  # bench_broker: Redis, beside the broker
  wanted[redis-benchmark]=redis-tools
  wanted[/usr/sbin/syslog-ng]=syslog-ng-core  # bench_agent: syslog-ng, beside the agent
  wanted[/usr/lib/syslog-ng/3.38/libkafka.so]=syslog-ng-mod-rdkafka  # Debian 12's module dir
}

sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(up test bench)
for set in "${sets[@]}"; do
  case "$set" in
    up) want_up ;;
    test) want_test ;;
    bench) want_bench ;;
    *)
      echo "system-deps: unknown set '$set' (expected up, test or bench)" >&2
      exit 2
      ;;
  esac
done

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
