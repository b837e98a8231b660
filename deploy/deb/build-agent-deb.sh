#!/usr/bin/env bash
# Build a Debian package of the logflume agent from a wheel (make dist):
#
#   deploy/deb/build-agent-deb.sh --wheel dist/logflume-0.1.0-*.whl [--out dist]
#
# The package is self-contained like Fluent Bit's and Vector's: a virtualenv with
# logflume[agent] and its dependencies at /opt/logflume (the layout install-agent.sh
# makes, so the units are the same), built here against Debian's python3.11, which is
# all it depends on. It also ships the production web host's configuration,
# deploy/agent/, as conffiles (0640 root:logflume): /etc/logflume/pipelines.yaml and
# /etc/logflume/agent.env, whose settings are unset; and, a conffile too,
# /etc/sysctl.d/60-logflume-agent.conf (net.core.rmem_max for a UDP source's receive
# buffer: read at the next boot, not applied by the installation). And the
# logflume-agent@.service template, /usr/bin/logflume, the manual page and bash and
# zsh completion (zsh's in /usr/share/zsh/vendor-completions, where Debian's packages
# put theirs). Installing it creates the `logflume` user and the state directories and
# starts and enables nothing: agent.env needs this host's settings first. Upgrading it
# restarts the running agents (postinst); removing it stops and disables them (prerm).
#
# The package's version is the wheel's (logflume-0.1.0-*.whl: logflume-agent 0.1.0-1).
set -euo pipefail
# The package's virtualenv holds what pip installs into it: a caller's PYTHONPATH (a source tree,
# another environment) would make pip take the logflume it finds there as installed.
unset PYTHONPATH

usage() {
  cat <<'USAGE'
usage: build-agent-deb.sh --wheel FILE [options]
  --wheel FILE       the logflume wheel to package (make dist)
  --out DIR          where to write logflume-agent_VERSION-1_ARCH.deb (default: dist)
  --python PATH      the Python the package runs on (default: /usr/bin/python3.11,
                     Debian's, which the package depends on)
  --pip-args "ARGS"  extra arguments for `pip install` (e.g. "--no-index --find-links DIR")
USAGE
}

die() { echo "build-agent-deb: $*" >&2; exit 1; }

source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$source_dir/dist"
python=/usr/bin/python3.11
wheel=""
pip_args=()

while [ $# -gt 0 ]; do
  case "$1" in
    --wheel) [ $# -ge 2 ] || die "--wheel needs a file"; wheel="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out="$2"; shift 2 ;;
    --python) [ $# -ge 2 ] || die "--python needs a path"; python="$2"; shift 2 ;;
    --pip-args) [ $# -ge 2 ] || die "--pip-args needs a value"; read -r -a pip_args <<<"$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
done

[[ "$wheel" == *.whl && -f "$wheel" ]] || die "--wheel: no wheel file '$wheel' (make dist builds one)"
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (Debian's dpkg package)"
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null \
  || die "$python is missing or not Python 3.11 (the package depends on python3.11)"
wheel="$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")"
version="$(basename "$wheel" | cut -d- -f2)"
arch="$(dpkg --print-architecture)"
package="logflume-agent_${version}-1_${arch}.deb"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
venv="$root/opt/logflume"

# 1. The virtualenv, built where it will not live, then pointed at /opt/logflume:
#    only its scripts and pyvenv.cfg name their own path. No bytecode is shipped;
#    postinst compiles it in place (and prerm removes it), as Debian's Python packages do.
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
  "${pip_args[@]}" "${wheel}[agent]"
# the agent's optional nginx parser in C, when `make dist` built it beside the wheel
# (for this machine: the package is of this architecture)
parser_wheel=""
for candidate in "$(dirname "$wheel")"/logflume_nginxparse-*.whl; do  # the newest
  if [ -f "$candidate" ] && { [ -z "$parser_wheel" ] || [ "$candidate" -nt "$parser_wheel" ]; }; then
    parser_wheel="$candidate"
  fi
done
if [ -n "$parser_wheel" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps \
    "${pip_args[@]}" "$parser_wheel"
fi
"$venv/bin/python" -m logflume manpage | gzip -9n >"$stage/logflume.1.gz"
"$venv/bin/python" -m logflume completion bash >"$stage/logflume.bash"
"$venv/bin/python" -m logflume completion zsh >"$stage/_logflume"
grep -rlI --null -F "$venv" "$venv" | xargs -0 -r sed -i "s|$venv|/opt/logflume|g"
find "$venv" -name __pycache__ -type d -prune -exec rm -rf {} +
if grep -rqF "$stage" "$venv"; then
  die "the virtualenv still names the build directory: $(grep -rlF "$stage" "$venv" | head -3)"
fi
install -d "$venv/share/logflume"
install -m 0644 "$source_dir/deploy/README.md" "$venv/share/logflume/README.md"

# 2. Configuration, unit, command, manual, completion, documentation.
install -d "$root/etc/logflume" "$root/etc/sysctl.d" "$root/lib/systemd/system" "$root/usr/bin" \
  "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" \
  "$root/usr/share/zsh/vendor-completions" "$root/usr/share/doc/logflume-agent"
install -m 0640 "$source_dir/deploy/agent/pipelines.yaml" "$source_dir/deploy/agent/agent.env" \
  "$root/etc/logflume/"
install -m 0644 "$source_dir/deploy/sysctl/60-logflume-agent.conf" "$root/etc/sysctl.d/"
install -m 0644 "$source_dir/deploy/systemd/logflume-agent@.service" "$root/lib/systemd/system/"
ln -s /opt/logflume/bin/logflume "$root/usr/bin/logflume"
install -m 0644 "$stage/logflume.1.gz" "$root/usr/share/man/man1/logflume.1.gz"
install -m 0644 "$stage/logflume.bash" "$root/usr/share/bash-completion/completions/logflume"
install -m 0644 "$stage/_logflume" "$root/usr/share/zsh/vendor-completions/_logflume"
install -m 0644 "$source_dir/deploy/README.md" "$root/usr/share/doc/logflume-agent/README.md"

# 3. Package metadata and maintainer scripts.
install -d "$root/DEBIAN"
for script in postinst prerm postrm; do
  install -m 0755 "$source_dir/deploy/deb/$script" "$root/DEBIAN/$script"
done
printf '%s\n' /etc/logflume/pipelines.yaml /etc/logflume/agent.env \
  /etc/sysctl.d/60-logflume-agent.conf >"$root/DEBIAN/conffiles"
cat >"$root/DEBIAN/control" <<CONTROL
Package: logflume-agent
Version: ${version}-1
Architecture: ${arch}
Maintainer: logflume developers <logflume@localhost>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: python3.11, passwd
Section: admin
Priority: optional
Homepage: file:///usr/share/doc/logflume-agent/README.md
Description: log agent: tails nginx logs, takes UDP/TCP/HTTP lines, ships to Kafka
 The logflume agent tails log files and accepts lines over UDP, TCP and HTTP,
 buffers them in memory or file channels and delivers them, batched and
 compressed, to any Kafka-compatible broker. Agents are declared in
 /etc/logflume/pipelines.yaml and run as logflume-agent@NAME.service.
CONTROL

mkdir -p "$out"
dpkg-deb --root-owner-group --build "$root" "$out/$package" >/dev/null
echo "$out/$package"
