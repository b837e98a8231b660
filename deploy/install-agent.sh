#!/usr/bin/env bash
# Install logflume on a host: its own virtualenv, the `logflume` system user, the
# agent's configuration (the production template deploy/agent/pipelines.yaml and its
# settings file agent.env) and the systemd units. Safe to run again (upgrades the
# code, never overwrites an existing /etc/logflume/pipelines.yaml or agent.env). The
# agent's unit is enabled only once `logflume agent validate` passes with agent.env's
# settings. See deploy/README.md.
#
#   sudo deploy/install-agent.sh                 # system install under /opt/logflume
#   deploy/install-agent.sh --prefix /tmp/lf --demo-config
#                                                # trial install: everything under /tmp/lf,
#                                                # no user, no systemctl, no root needed
#   sudo deploy/install-agent.sh --wheel dist/logflume-0.1.0-*.whl   # code from a wheel
#
# Only the agent's dependencies are installed (`logflume[agent]`); a broker host adds
# `--extras agent,broker`, a Spark host `--extras etl`.
set -euo pipefail
# The virtualenv holds what pip installs into it: a caller's PYTHONPATH (a source tree,
# another environment) would make pip take the logflume it finds there as installed.
unset PYTHONPATH

usage() {
  cat <<'EOF'
usage: install-agent.sh [options]
  --prefix DIR       trial install: virtualenv, etc/, var/ and unit files all under DIR;
                     creates no user and does not touch systemd (default: a system
                     install into /opt/logflume, /etc/logflume, /var/lib/logflume)
  --source DIR       the logflume source tree to install (default: this script's repo);
                     the units and the configuration always come from it
  --wheel FILE       install the code from this wheel (python -m build) instead
  --from-index       install the code from the package index pip is set up with
                     (pip.conf, or --pip-args "--index-url URL") instead
  --extras LIST      the parts to install dependencies for: agent, broker, etl, all,
                     comma-separated (default: agent)
  --demo-config      install the demo's pipelines.yaml (the one `make up` runs: local
                     broker, no settings needed) instead of the production template
                     deploy/agent/pipelines.yaml: for trials
  --agent NAME       agent of pipelines.yaml whose unit gets enabled (default: web), once
                     `logflume agent validate` passes with agent.env's settings
  --no-enable        install the units but enable none (e.g. on a broker host)
  --python PATH      Python >= 3.11 that creates the virtualenv (default: python3)
  --pip-args "ARGS"  extra arguments for `pip install` (e.g. "--no-index --find-links DIR")
  --reuse-site-packages DIR
                     make the packages already in DIR (a site-packages directory of the
                     same Python version) visible to the new virtualenv, so that pip only
                     installs what is missing there: for offline hosts and quick trials
EOF
}

die() { echo "install-agent: $*" >&2; exit 1; }
say() { echo "install-agent: $*"; }

source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix=/opt/logflume
trial=0
agent=web
enable=1
python=python3
pip_args=()
reuse=""
wheel=""
from_index=0
extras=agent
demo_config=0

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix="$2"; trial=1; shift 2 ;;
    --source) [ $# -ge 2 ] || die "--source needs a directory"; source_dir="$2"; shift 2 ;;
    --wheel) [ $# -ge 2 ] || die "--wheel needs a file"; wheel="$2"; shift 2 ;;
    --from-index) from_index=1; shift ;;
    --extras) [ $# -ge 2 ] || die "--extras needs a list"; extras="$2"; shift 2 ;;
    --demo-config) demo_config=1; shift ;;
    --agent) [ $# -ge 2 ] || die "--agent needs a name"; agent="$2"; shift 2 ;;
    --no-enable) enable=0; shift ;;
    --python) [ $# -ge 2 ] || die "--python needs a path"; python="$2"; shift 2 ;;
    --pip-args) [ $# -ge 2 ] || die "--pip-args needs a value"; read -r -a pip_args <<<"$2"; shift 2 ;;
    --reuse-site-packages) [ $# -ge 2 ] || die "--reuse-site-packages needs a directory"; reuse="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
done

[ -f "$source_dir/pyproject.toml" ] || die "$source_dir is not a logflume source tree (no pyproject.toml)"
[ -f "$source_dir/deploy/systemd/logflume-agent@.service" ] || die "$source_dir has no deploy/systemd units"
[ -f "$source_dir/deploy/agent/agent.env" ] || die "$source_dir has no deploy/agent configuration"
[ -z "$reuse" ] || [ -d "$reuse" ] || die "--reuse-site-packages: no directory $reuse"
[ -z "$wheel" ] || [ "$from_index" -eq 0 ] || die "--wheel and --from-index exclude each other"
[ -z "$wheel" ] || [[ "$wheel" == *.whl && -f "$wheel" ]] || die "--wheel: no wheel file $wheel"
[[ "$extras" =~ ^(agent|broker|etl|all)(,(agent|broker|etl|all))*$ ]] \
  || die "--extras: expected a comma-separated list of agent, broker, etl, all; got '$extras'"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  || die "$python is missing or older than Python 3.11 (use --python)"

if [ "$trial" -eq 1 ]; then
  mkdir -p "$prefix"
  prefix="$(cd "$prefix" && pwd)"
  etc_dir="$prefix/etc/logflume"
  state_dir="$prefix/var/lib/logflume"
  log_dir="$prefix/var/log/logflume"
  unit_dir="$prefix/etc/systemd/system"
else
  [ "$(id -u)" -eq 0 ] || die "a system install needs root (or use --prefix DIR for a trial install)"
  etc_dir=/etc/logflume
  state_dir=/var/lib/logflume
  log_dir=/var/log/logflume
  unit_dir=/etc/systemd/system
fi

# 1. The virtualenv and the code. pip builds from a copy of the source, so the
#    source tree may be read-only and is left as it was.
if [ ! -x "$prefix/bin/python" ]; then
  say "creating virtualenv $prefix"
  "$python" -m venv "$prefix"
fi
if [ -n "$reuse" ]; then
  site="$("$prefix/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  (cd "$reuse" && pwd) >"$site/logflume-reuse.pth"
fi
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
if [ -n "$wheel" ]; then
  target="$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")[$extras]"
  say "installing logflume[$extras] from $wheel"
elif [ "$from_index" -eq 1 ]; then
  target="logflume[$extras]"
  say "installing logflume[$extras] from the package index"
else
  mkdir "$build/src"
  tar -C "$source_dir" --exclude=./.git --exclude=./.venv --exclude=./data --exclude=./build \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude=./bench/out -cf - . \
    | tar -C "$build/src" -xf -
  target="$build/src[$extras]"
  say "installing logflume[$extras] from $source_dir"
fi
"$prefix/bin/python" -m pip install --quiet --disable-pip-version-check "${pip_args[@]}" "$target"
"$prefix/bin/logflume" --help >/dev/null || die "$prefix/bin/logflume does not run"
install -d -m 0755 "$prefix/share/logflume"
install -m 0644 "$source_dir/deploy/README.md" "$prefix/share/logflume/README.md"

# 1b. The command for operators: logflume(1) and bash completion, generated by the
#     installed code. A system install puts them and a `logflume` symlink under
#     /usr/local (an existing /usr/local/bin/logflume that is not ours is left alone).
if [ "$trial" -eq 1 ]; then
  share="$prefix/share"
else
  share=/usr/local/share
  if [ ! -e /usr/local/bin/logflume ] || [ -L /usr/local/bin/logflume ]; then
    ln -sfn "$prefix/bin/logflume" /usr/local/bin/logflume
  else
    say "keeping /usr/local/bin/logflume, which is not a link to $prefix/bin/logflume"
  fi
fi
install -d -m 0755 "$share/man/man1" "$share/bash-completion/completions"
"$prefix/bin/logflume" manpage >"$build/logflume.1"
install -m 0644 "$build/logflume.1" "$share/man/man1/logflume.1"
"$prefix/bin/logflume" completion bash >"$build/logflume.bash"
install -m 0644 "$build/logflume.bash" "$share/bash-completion/completions/logflume"

# 2. The system user (system install only). It may read what group adm reads, which
#    on Debian includes /var/log/nginx.
if [ "$trial" -eq 0 ]; then
  if ! getent passwd logflume >/dev/null; then
    say "creating system user logflume"
    useradd --system --user-group --home-dir "$state_dir" --no-create-home \
      --shell /usr/sbin/nologin --comment "logflume agent and broker" logflume
  fi
  if getent group adm >/dev/null; then
    usermod -a -G adm logflume
  fi
fi

# 3. Configuration and state: pipelines.yaml, the production template (or with
#    --demo-config the demo's), and agent.env, the units' EnvironmentFile, whose
#    settings (the template's ${LOGFLUME_...}) are left unset for the operator. Existing
#    files are the operator's: kept. They hold credentials, so only root and group
#    logflume read them. The state and log directories include those of the offline
#    job's cron line (share/logflume/).
if [ "$demo_config" -eq 1 ]; then
  config_source="$source_dir/pipelines.yaml"
  config_kind="the demo's pipelines, for \`make up\`'s local broker"
else
  config_source="$source_dir/deploy/agent/pipelines.yaml"
  config_kind="the production web host's template; its settings go in agent.env"
fi
install -d -m 0755 "$etc_dir"
if [ -e "$etc_dir/pipelines.yaml" ]; then
  say "keeping existing $etc_dir/pipelines.yaml"
else
  install -m 0640 "$config_source" "$etc_dir/pipelines.yaml"
  say "wrote $etc_dir/pipelines.yaml ($config_kind)"
fi
if [ -e "$etc_dir/agent.env" ]; then
  say "keeping existing $etc_dir/agent.env"
else
  install -m 0640 "$source_dir/deploy/agent/agent.env" "$etc_dir/agent.env"
  say "wrote $etc_dir/agent.env (settings for pipelines.yaml, unset until edited)"
fi
install -d -m 0750 "$state_dir" "$state_dir/etl" "$log_dir"
if [ "$trial" -eq 0 ]; then
  chown root:logflume "$etc_dir/pipelines.yaml" "$etc_dir/agent.env"
  chown logflume:logflume "$state_dir" "$state_dir/etl" "$log_dir"
fi

# 4. systemd units, with their paths rewritten for a trial prefix: the agent and
#    broker templates, and the offline Spark job's service and timer (deploy/etl/).
#    Installing a unit does not enable it.
install -d -m 0755 "$unit_dir"
installed=()
for path in "$source_dir"/deploy/systemd/*.service "$source_dir"/deploy/etl/*.service \
  "$source_dir"/deploy/etl/*.timer; do
  [ -e "$path" ] || continue
  unit="$(basename "$path")"
  sed -e "s|/opt/logflume|$prefix|g" -e "s|/etc/logflume|$etc_dir|g" \
    -e "s|/var/lib/logflume|$state_dir|g" "$path" >"$build/$unit"
  install -m 0644 "$build/$unit" "$unit_dir/$unit"
  installed+=("$unit")
done
say "installed units ${installed[*]} in $unit_dir"
# The cron line, for hosts without systemd: to be copied to /etc/cron.d by hand.
sed -e "s|/opt/logflume|$prefix|g" -e "s|/var/lib/logflume|$state_dir|g" \
  -e "s|/var/log/logflume|$log_dir|g" "$source_dir/deploy/etl/logflume-etl-offline.cron" \
  >"$build/logflume-etl-offline.cron"
install -m 0644 "$build/logflume-etl-offline.cron" "$prefix/share/logflume/logflume-etl-offline.cron"

# 5. The agent's unit is enabled only with a configuration that validates with
#    agent.env's settings, checked as the unit's ExecStartPre will (as user logflume),
#    so that no unit is enabled to fail at the next boot. Enabling starts nothing.
check=("$prefix/bin/logflume" agent validate --config "$etc_dir/pipelines.yaml"
  --env-file "$etc_dir/agent.env")
valid=0
if [ "$enable" -eq 1 ]; then
  as_agent=()
  [ "$trial" -eq 1 ] || as_agent=(runuser -u logflume --)
  if problems="$(cd / && "${as_agent[@]}" "${check[@]}" 2>&1)"; then
    valid=1
  fi
fi
systemd=0
[ "$trial" -eq 1 ] || [ ! -d /run/systemd/system ] || systemd=1
if [ "$systemd" -eq 1 ]; then
  systemctl daemon-reload
elif [ "$trial" -eq 0 ]; then
  say "systemd is not running here: units installed but not enabled"
fi
if [ "$enable" -eq 1 ] && [ "$valid" -eq 1 ] && [ "$systemd" -eq 1 ]; then
  systemctl enable "logflume-agent@$agent.service"
  say "enabled logflume-agent@$agent (start it with: systemctl start logflume-agent@$agent)"
elif [ "$enable" -eq 1 ] && [ "$valid" -eq 0 ]; then
  state="is NOT enabled:"
  if [ "$systemd" -eq 1 ] && systemctl is-enabled --quiet "logflume-agent@$agent.service"; then
    state="stays enabled (by an earlier install), but"
  fi
  say "logflume-agent@$agent $state $etc_dir/pipelines.yaml does not validate" \
    "with the settings of $etc_dir/agent.env:"
  mapfile -t lines <<<"$problems"
  printf '    %s\n' "${lines[@]}"
fi

if [ "$trial" -eq 0 ]; then
  start="systemctl enable --now logflume-agent@$agent"
else
  start="$prefix/bin/logflume agent run --config $etc_dir/pipelines.yaml --env-file $etc_dir/agent.env --name $agent --state-dir $state_dir/agent-$agent"
fi
cat <<EOF
install-agent: done. Next:
  edit     $etc_dir/agent.env (the settings of pipelines.yaml), or pipelines.yaml itself
  check    ${check[*]}
  start    $start
EOF
