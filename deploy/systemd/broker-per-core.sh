#!/usr/bin/env bash
# One broker per core of this host: for each core, a broker id, its properties file
# and a drop-in of its logflume-broker@<id> instance that pins it to the core
# (CPUAffinity=). A broker process runs one event loop, so it uses one core; a host
# with N cores runs N brokers (deploy/README.md, "Every core of a host").
#
#   broker-per-core.sh --first-id 30 --host broker3.example.net \
#       --zookeeper zk1:2181,zk2:2181,zk3:2181/logflume [--rack rack-a] \
#       [--cores 0-15] [--base-port 9092] [--common FILE] [--root DIR]
#
# Broker i (0-based, in core order) gets id first-id + i, port base-port + i,
# /etc/logflume/broker-<id>.properties (listeners on every address, advertised as
# --host, the same host for every broker here: that is how replica placement knows
# they share a machine; broker.rack when given; then the lines of --common, keys every
# broker shares) and /etc/systemd/system/logflume-broker@<id>.service.d/cpu.conf.
# A properties file that exists is left as it is (said on stderr); the drop-ins are
# rewritten. Nothing is enabled: the script prints the systemctl commands to run.
# --root writes under DIR instead of / (to look before installing).
set -euo pipefail

die() {
  echo "broker-per-core: $*" >&2
  exit 2
}

first_id="" host="" zookeeper="" rack="" cores="" base_port=9092 common="" root=""
while [ $# -gt 0 ]; do
  case "$1" in
    --first-id | --host | --zookeeper | --rack | --cores | --base-port | --common | --root)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --first-id) first_id=$2 ;;
        --host) host=$2 ;;
        --zookeeper) zookeeper=$2 ;;
        --rack) rack=$2 ;;
        --cores) cores=$2 ;;
        --base-port) base_port=$2 ;;
        --common) common=$2 ;;
        --root) root=$2 ;;
      esac
      shift 2
      ;;
    -h | --help)
      sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

[ -n "$first_id" ] || die "--first-id is required (the id of this host's first broker)"
[ -n "$host" ] || die "--host is required (this machine's name, as clients and brokers reach it)"
[ -n "$zookeeper" ] || die "--zookeeper is required (the cluster's zookeeper.connect)"
[[ "$first_id" =~ ^[0-9]+$ ]] || die "--first-id $first_id: a broker id (0 or more)"
[[ "$base_port" =~ ^[0-9]+$ ]] || die "--base-port $base_port: a port number"
[ -z "$common" ] || [ -r "$common" ] || die "--common $common: no such readable file"

# --cores: a list like 0-3,8,10-11 (taskset's); default: every core this script may use
if [ -z "$cores" ]; then
  cores=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
fi
core_list=()
IFS=, read -r -a ranges <<<"$cores"
for range in "${ranges[@]}"; do
  if [[ "$range" =~ ^([0-9]+)-([0-9]+)$ ]]; then
    low=${BASH_REMATCH[1]} high=${BASH_REMATCH[2]}
    [ "$low" -le "$high" ] || die "--cores $cores: $range goes backwards"
    for ((c = low; c <= high; c++)); do core_list+=("$c"); done
  elif [[ "$range" =~ ^[0-9]+$ ]]; then
    core_list+=("$range")
  else
    die "--cores $cores: a list of cores such as 0-3,8"
  fi
done
last_port=$((base_port + ${#core_list[@]} - 1))
[ "$last_port" -le 65535 ] || die "--base-port $base_port: the last broker's port $last_port is over 65535"

etc="$root/etc/logflume"
units="$root/etc/systemd/system"
mkdir -p "$etc"
ids=()
for i in "${!core_list[@]}"; do
  core=${core_list[$i]}
  id=$((first_id + i))
  port=$((base_port + i))
  ids+=("$id")
  properties="$etc/broker-$id.properties"
  if [ -e "$properties" ]; then
    echo "broker-per-core: $properties exists: left as it is" >&2
  else
    {
      echo "# broker $id, pinned to core $core of $host (deploy/systemd/broker-per-core.sh)"
      echo "listeners=PLAINTEXT://0.0.0.0:$port"
      echo "advertised.listeners=PLAINTEXT://$host:$port"
      echo "zookeeper.connect=$zookeeper"
      [ -z "$rack" ] || echo "broker.rack=$rack"
      [ -z "$common" ] || cat "$common"
    } >"$properties"
  fi
  dropin="$units/logflume-broker@$id.service.d"
  mkdir -p "$dropin"
  printf '# broker %s on core %s (deploy/systemd/broker-per-core.sh)\n[Service]\nCPUAffinity=%s\n' \
    "$id" "$core" "$core" >"$dropin/cpu.conf"
  echo "broker $id: core $core, port $port, $properties"
done

instances=$(printf 'logflume-broker@%s ' "${ids[@]}")
echo "then: systemctl daemon-reload && systemctl enable --now ${instances% }"
