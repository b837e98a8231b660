#!/usr/bin/env bash
# Install logflume on a host: its own virtualenv, the `logflume` system user, the
# agent's configuration (the production template deploy/agent/pipelines.yaml and its
# settings file agent.env) and the systemd units. The agent's unit is enabled only once
# `logflume agent validate` passes with agent.env's settings, and never on the demo's
# configuration (--demo-config). See deploy/README.md.
#
# Running it again upgrades in place: the code is replaced (also by a wheel or source
# of the same version), an existing /etc/logflume/pipelines.yaml or agent.env is never
# overwritten, and the running logflume-agent@ units are restarted on the new code
# (`systemctl try-restart`, once the configuration validates with it).
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
                     deploy/agent/pipelines.yaml: for trials; no unit is enabled on it
  --agent NAME       agent of pipelines.yaml whose unit gets enabled (default: web), once
                     `logflume agent validate` passes with agent.env's settings
  --no-enable        install the units but enable none (e.g. on a broker host)
  --udp-buffer-sysctl
                     also install deploy/sysctl/60-logflume-agent.conf into
                     /etc/sysctl.d and apply it (net.core.rmem_max=64 MiB: room for a
                     UDP source's receive buffer; see deploy/README.md)
  --python PATH      Python >= 3.11 that creates the virtualenv (default: python3)
  --pip-args "ARGS"  extra arguments for pip (`pip install`, and `pip wheel` building the
                     source), e.g. "--no-index --find-links DIR"
  --reuse-site-packages DIR
                     make the packages already in DIR (a site-packages directory of the
                     same Python version) visible to the new virtualenv, so that pip only
                     installs what is missing there: for offline hosts and quick trials
EOF
}

die() { echo "install-agent: $*" >&2; exit 1; }
say() { echo "install-agent: $*"; }
# The newest `$1-*.whl` beside the logflume wheel given with --wheel (empty if none).
newest_beside() {
  local newest="" candidate
  for candidate in "$(dirname "$code")/$1"-*.whl; do
    if [ -f "$candidate" ] && { [ -z "$newest" ] || [ "$candidate" -nt "$newest" ]; }; then
      newest="$candidate"
    fi
  done
  printf '%s' "$newest"
}

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
udp_sysctl=0
# Where a host booted with systemd has a directory (sd_booted(3)); tests point it at
# one of their own, with a stub systemctl on the PATH.
systemd_run="${LOGFLUME_RUN_SYSTEMD_SYSTEM:-/run/systemd/system}"

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
    --udp-buffer-sysctl) udp_sysctl=1; shift ;;
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
[ "$udp_sysctl" -eq 0 ] || [ -f "$source_dir/deploy/sysctl/60-logflume-agent.conf" ] \
  || die "$source_dir has no deploy/sysctl/60-logflume-agent.conf"
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
  sysctl_dir="$prefix/etc/sysctl.d"
else
  [ "$(id -u)" -eq 0 ] || die "a system install needs root (or use --prefix DIR for a trial install)"
  etc_dir=/etc/logflume
  state_dir=/var/lib/logflume
  log_dir=/var/log/logflume
  unit_dir=/etc/systemd/system
  sysctl_dir=/etc/sysctl.d
fi

# 1. The virtualenv and the code. pip builds from a copy of the source, so the
#    source tree may be read-only and is left as it was. Run again, this upgrades:
#    `--upgrade` takes the newer logflume and whatever dependency its requirements
#    need (no other), then logflume alone is reinstalled from the same wheel
#    (`--force-reinstall --no-deps`), since pip keeps an installed version equal to a
#    wheel's even when the code differs (a tree changed since, a rebuilt wheel). From
#    an index one version is one content: the upgrade suffices.
installed_version() {  # -I: not a logflume of the working directory (a source tree)
  [ -x "$prefix/bin/logflume" ] || return 0
  "$prefix/bin/python" -I -c 'import importlib.metadata as m; print(m.version("logflume"))' \
    2>/dev/null || true
}
if [ ! -x "$prefix/bin/python" ]; then
  say "creating virtualenv $prefix"
  "$python" -m venv "$prefix"
fi
before="$(installed_version)"
if [ -n "$reuse" ]; then
  site="$("$prefix/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  (cd "$reuse" && pwd) >"$site/logflume-reuse.pth"
fi
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
pip=("$prefix/bin/python" -m pip --disable-pip-version-check)
if [ -n "$wheel" ]; then
  code="$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")"
  say "installing logflume[$extras] from $wheel"
elif [ "$from_index" -eq 1 ]; then
  code=logflume
  say "installing logflume[$extras] from the package index"
else
  mkdir "$build/src" "$build/wheel"
  tar -C "$source_dir" --exclude=./.git --exclude=./.venv --exclude=./data --exclude=./build \
    --exclude=./native/recordscheck/build --exclude=./native/nginxparse/build \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude=./bench/out -cf - . \
    | tar -C "$build/src" -xf -
  say "installing logflume[$extras] from $source_dir"
  "${pip[@]}" wheel --quiet --no-deps "${pip_args[@]}" --wheel-dir "$build/wheel" "$build/src"
  code="$(echo "$build"/wheel/logflume-*.whl)"
  [ -f "$code" ] || die "pip built no logflume wheel from $source_dir"
fi
# The broker and etl extras require logflume-recordscheck (the records check and the
# Spark source's record decoding in C, its own distribution so that the logflume wheel
# stays pure Python), which no package index has: it comes from the tree's
# native/recordscheck, or as the wheel `make dist` puts beside logflume's.
native=()
if [[ ",$extras," =~ ,(broker|etl|all), ]] && [ "$from_index" -eq 0 ]; then
  if [ -n "$wheel" ]; then
    native_wheel="$(newest_beside logflume_recordscheck)"
    [ -n "$native_wheel" ] || die "--extras $extras needs logflume_recordscheck-*.whl beside $wheel (make dist builds both)"
  else
    "${pip[@]}" wheel --quiet --no-deps "${pip_args[@]}" --wheel-dir "$build/native" \
      "$build/src/native/recordscheck"
    native_wheel="$(echo "$build"/native/logflume_recordscheck-*.whl)"
    [ -f "$native_wheel" ] || die "pip built no logflume-recordscheck wheel from $source_dir"
  fi
  native=("$native_wheel")
fi
# The agent's nginx parser in C (native/nginxparse) is optional: without it an agent
# parses every line in Python, at about twice the CPU per line. From a tree it is built
# where a C compiler and Python's headers are; with --wheel it is taken from beside the
# wheel when `make dist` put one there. A wheel that does not build or does not suit
# this machine is said and left out.
parser_wheel=""
if [[ ",$extras," =~ ,(agent|all), ]] && [ "$from_index" -eq 0 ]; then
  if [ -n "$wheel" ]; then
    parser_wheel="$(newest_beside logflume_nginxparse)"
  elif "${pip[@]}" wheel --quiet --no-deps "${pip_args[@]}" --wheel-dir "$build/parser" \
      "$build/src/native/nginxparse" >"$build/parser.log" 2>&1; then
    parser_wheel="$(echo "$build"/parser/logflume_nginxparse-*.whl)"
  else
    say "the nginx parser in C did not build (it needs a C compiler and python3-dev): the agent parses in Python"
  fi
fi
"${pip[@]}" install --quiet --upgrade "${pip_args[@]}" "${code}[$extras]" "${native[@]}"
if [ "$from_index" -eq 0 ]; then
  "${pip[@]}" install --quiet --force-reinstall --no-deps "${pip_args[@]}" "$code"
fi
if [ -n "$parser_wheel" ]; then
  if "${pip[@]}" install --quiet --force-reinstall --no-deps "${pip_args[@]}" "$parser_wheel" \
      >"$build/parser.log" 2>&1; then
    say "installed the nginx parser in C ($(basename "$parser_wheel"))"
  else
    say "$(basename "$parser_wheel") does not install here: the agent parses in Python"
  fi
fi
"$prefix/bin/logflume" --help >/dev/null || die "$prefix/bin/logflume does not run"
after="$(installed_version)"
if [ -z "$before" ]; then
  say "installed logflume $after into $prefix"
elif [ "$before" = "$after" ] && [ "$from_index" -eq 1 ]; then
  say "kept logflume $after in $prefix (the newest the package index has)"
elif [ "$before" = "$after" ]; then
  say "reinstalled logflume $after in $prefix (the same version: its code replaced)"
elif [ "$(printf '%s\n' "$before" "$after" | sort -V | tail -n 1)" = "$after" ]; then
  say "upgraded logflume $before -> $after in $prefix"
else
  say "downgraded logflume $before -> $after in $prefix"
fi
install -d -m 0755 "$prefix/share/logflume"
install -m 0644 "$source_dir/deploy/README.md" "$prefix/share/logflume/README.md"

# 1b. The command for operators: logflume(1) and bash and zsh completion, generated
#     by the installed code (zsh's `_logflume` in share/zsh/site-functions, which
#     Debian's zsh has on its fpath under /usr/local). A system install puts them and
#     a `logflume` symlink under /usr/local (an existing /usr/local/bin/logflume that
#     is not ours is left alone).
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
install -d -m 0755 "$share/man/man1" "$share/bash-completion/completions" \
  "$share/zsh/site-functions"
"$prefix/bin/logflume" manpage >"$build/logflume.1"
install -m 0644 "$build/logflume.1" "$share/man/man1/logflume.1"
"$prefix/bin/logflume" completion bash >"$build/logflume.bash"
install -m 0644 "$build/logflume.bash" "$share/bash-completion/completions/logflume"
"$prefix/bin/logflume" completion zsh >"$build/_logflume"
install -m 0644 "$build/_logflume" "$share/zsh/site-functions/_logflume"

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

# 4b. With --udp-buffer-sysctl: net.core.rmem_max raised for a UDP source's 64 MiB
#     receive buffer, which the unit's empty CapabilityBoundingSet otherwise caps.
#     An existing file is the operator's: kept. Applied now on a system install (and
#     at every boot by systemd-sysctl), before the agents restart below.
if [ "$udp_sysctl" -eq 1 ]; then
  conf="$sysctl_dir/60-logflume-agent.conf"
  install -d -m 0755 "$sysctl_dir"
  if [ -e "$conf" ]; then
    say "keeping existing $conf"
  else
    install -m 0644 "$source_dir/deploy/sysctl/60-logflume-agent.conf" "$conf"
    say "wrote $conf (net.core.rmem_max for a UDP source's receive buffer)"
  fi
  wanted="$(sed -n 's/^[[:space:]]*net\.core\.rmem_max[[:space:]]*=[[:space:]]*//p' "$conf")"
  if [ "$trial" -eq 1 ]; then
    say "trial install: $conf is not applied (on a host: sysctl -p $conf)"
  elif command -v sysctl >/dev/null && sysctl -q -p "$conf" >/dev/null 2>&1 \
    && [ "$(sysctl -n net.core.rmem_max)" = "$wanted" ]; then
    say "applied $conf: net.core.rmem_max=$wanted"
  else
    now="$(sysctl -n net.core.rmem_max 2>/dev/null || echo unknown)"
    say "could not apply $conf here (net.core.rmem_max is $now): it applies at the" \
      "next boot, or run: sysctl --system"
  fi
fi

# 5. The agent's unit is enabled only with a configuration that validates with
#    agent.env's settings, checked as the unit's ExecStartPre will (as user logflume),
#    so that no unit is enabled to fail at the next boot; and never on the demo's
#    pipelines (a log path relative to the working directory, UDP on 0.0.0.0), whether
#    --demo-config installed them now or an earlier run did. Enabling starts nothing.
#    The agents running now run the code just replaced: they are restarted on the new
#    code (try-restart: only those running), once the configuration validates with it,
#    so that a restart cannot stop an agent for good.
check=("$prefix/bin/logflume" agent validate --config "$etc_dir/pipelines.yaml"
  --env-file "$etc_dir/agent.env")
failed=0
systemd=0
[ "$trial" -eq 1 ] || [ ! -d "$systemd_run" ] || systemd=1
running=()
if [ "$systemd" -eq 1 ]; then
  systemctl daemon-reload
  mapfile -t running < <(systemctl list-units --plain --no-legend --state=active \
    'logflume-agent@*.service' | awk '{print $1}')
elif [ "$trial" -eq 0 ]; then
  say "systemd is not running here: units installed but not enabled, no agent restarted"
fi
demo=""
if cmp -s "$etc_dir/pipelines.yaml" "$source_dir/pipelines.yaml"; then
  demo="$etc_dir/pipelines.yaml is the demo's (a relative log path, UDP on 0.0.0.0),"
  demo+=" for trials only: put the production template deploy/agent/pipelines.yaml there"
elif [ "$demo_config" -eq 1 ]; then
  demo="--demo-config was given (the demo's pipelines are for trials only);"
  demo+=" run the script without it to enable the unit"
fi
valid=0
problems=""
if { [ "$enable" -eq 1 ] && [ -z "$demo" ]; } || [ ${#running[@]} -gt 0 ]; then
  as_agent=()
  [ "$trial" -eq 1 ] || as_agent=(runuser -u logflume --)
  if problems="$(cd / && "${as_agent[@]}" "${check[@]}" 2>&1)"; then
    valid=1
  fi
fi
shown=0
show_problems() {
  local lines
  [ "$shown" -eq 0 ] || { echo "    (validate's errors: above)"; return; }
  mapfile -t lines <<<"$problems"
  printf '    %s\n' "${lines[@]}"
  shown=1
}
if [ ${#running[@]} -gt 0 ] && [ "$valid" -eq 1 ]; then
  if systemctl try-restart "${running[@]}"; then
    say "restarted ${running[*]} on logflume $after (systemctl try-restart)"
  else
    say "systemctl try-restart ${running[*]} failed: see systemctl status ${running[*]}"
    failed=1
  fi
elif [ ${#running[@]} -gt 0 ]; then
  say "NOT restarting ${running[*]}: $etc_dir/pipelines.yaml does not validate with" \
    "logflume $after and the settings of $etc_dir/agent.env; they run the code they" \
    "started with until it does, then: systemctl try-restart 'logflume-agent@*'"
  show_problems
elif [ "$systemd" -eq 1 ]; then
  say "no logflume-agent@ unit is running: none restarted"
elif [ "$trial" -eq 1 ] && [ -n "$before" ]; then
  say "trial install: agents started from $prefix run the code they started with" \
    "until you restart them"
fi
if [ "$enable" -eq 1 ]; then
  state="is NOT enabled:"
  if [ "$systemd" -eq 1 ] && systemctl is-enabled --quiet "logflume-agent@$agent.service"; then
    state="stays enabled (by an earlier install), but"
  fi
  if [ -n "$demo" ]; then
    say "logflume-agent@$agent $state $demo"
  elif [ "$valid" -eq 0 ]; then
    say "logflume-agent@$agent $state $etc_dir/pipelines.yaml does not validate" \
      "with the settings of $etc_dir/agent.env:"
    show_problems
  elif [ "$systemd" -eq 1 ]; then
    systemctl enable "logflume-agent@$agent.service"
    say "enabled logflume-agent@$agent (start it with: systemctl start logflume-agent@$agent)"
  fi
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
exit "$failed"
