"""`logflume completion zsh`, driven in a real zsh as its completion would be.

zsh completes only in its line editor, so each test starts an interactive `zsh -f` in
a pseudo-terminal (the zsh/zpty module, from a second zsh), with `compinit` and the
generated `_logflume` on its fpath, and types command lines into it. Instead of TAB,
each line ends with a key bound to a widget that runs zsh's completion system
(`_main_complete`) with nothing inserted or listed, then prints a marker. A function
named `compadd` stands in for the builtin while it runs: every call that adds
matches (not those that only fill an array: -O, -A, -D) also writes the words that
match what was typed to a file, which the driver reads once the marker appears. The
driver waits for markers, never for a time; what the completion writes on stderr
is a failure.
"""

import argparse
import shutil
import subprocess
import sys

import pytest

from logflume.cli import build_parser

# The stand-in for compadd, and what it needs; it appends to $_logflume_test_matches.
CAPTURE = r"""
# Whether $1 is an order for compadd -o: match, nosort, numeric, reverse, or their
# first letters (at least two), comma-separated.
_logflume_test_order() {
  local part
  [[ -n $1 ]] || return 1
  for part in ${(s:,:)1}; do
    (( $#part >= 2 )) || return 1
    [[ match == $part* || nosort == $part* || numeric == $part* || reverse == $part* ]] \
      || return 1
  done
}

# Whether a call `compadd ARGS` adds matches, rather than only filling an array (-O,
# -A, -D). Its options are parsed as compadd parses them: letters may be clustered
# (-Qf); an option with an argument takes the rest of its word, or else the next word;
# -o takes an order in the same word or, when the next word is one, that word.
_logflume_test_adds() {
  local word letters
  local -i i=1
  while (( i <= $# )); do
    word=${@[i]}
    [[ $word == -?* && $word != -- ]] || return 0
    letters=${word#-}
    while [[ -n $letters ]]; do
      case $letters[1] in
        [OAD]) return 1 ;;
        [PSpsiIWdJVXxrRFME]) [[ -n $letters[2,-1] ]] || (( i++ )); break ;;
        o) [[ -z $letters[2,-1] ]] && _logflume_test_order "${@[i+1]}" && (( i++ )); break ;;
      esac
      letters=$letters[2,-1]
    done
    (( i++ ))
  done
  return 0
}

# compadd, as the completion functions call it: the words a call adds that match what
# was typed also go to the file. (Locals here would hide a caller's arrays of the same
# name, which compadd looks up by name: hence the one, with a name no caller uses.)
compadd() {
  if _logflume_test_adds "$@"; then
    local -a _logflume_test_added
    builtin compadd -O _logflume_test_added "$@"
    (( $#_logflume_test_added )) && print -rl -- $_logflume_test_added >>$_logflume_test_matches
  fi
  builtin compadd "$@"
}
"""

# Sourced by the interactive zsh: $1 the directory of _logflume, $2 a scratch directory.
SETUP = (
    r"""bindkey -e
fpath=($1 $fpath)
autoload -Uz compinit && compinit -u -D
# One match per word: grouped, _describe adds the options that share a description
# (-h, --help) again as one line of the list.
zstyle ':completion:*' list-grouped false
# names that no completion function makes local (compadd runs in their scope)
_logflume_test_matches=$2/matches _logflume_test_errors=$2/errors
"""
    + CAPTURE
    + r"""
_logflume_test_complete() {
  _main_complete
  compstate[insert]=''
  compstate[list]=''
}
zle -C logflume-test-complete complete-word _logflume_test_complete

_logflume_test_capture() {
  : >|$_logflume_test_matches
  : >|$_logflume_test_errors
  zle logflume-test-complete 2>>$_logflume_test_errors
  BUFFER=
  print -n '@@captured@@'
}
zle -N logflume-test-capture _logflume_test_capture
bindkey '^X@' logflume-test-capture

PS1='@@ready@@ '  # last: its prompt says all the above is done
"""
)

# zsh -f -c DRIVER driver SETUP FPATH_DIR SCRATCH LINE...: completes each LINE in one
# interactive zsh and prints its matches on a line of their own, tab-separated; what
# the completion wrote on stderr goes to stderr. The markers are printed by SETUP's
# code, never typed, so the echo of the typed input cannot match them.
DRIVER = r"""
zmodload zsh/zpty zsh/zselect || exit 3
typeset -F SECONDS
setup=$1 fpath_dir=$2 scratch=$3
shift 3
seen=

await() {
  local chunk
  local -F deadline=$(( SECONDS + 60 ))
  until [[ $seen == *"$1"* ]]; do
    if ! zpty -t shell; then
      while zpty -r shell chunk; do seen+=$chunk; done
      [[ $seen == *"$1"* ]] && break
      print -ru2 -- "zsh exited before $1; the terminal showed: ${(q+)seen}"
      exit 1
    fi
    if (( SECONDS > deadline )); then
      print -ru2 -- "no $1 within 60 s; the terminal showed: ${(q+)seen}"
      exit 1
    fi
    zselect -t 100 -r $fd  # returns when there is output (or after 1 s, to check the time)
    while zpty -rt shell chunk; do seen+=$chunk; done
  done
  seen=${seen#*"$1"}
}

zpty -b shell zsh -f -i
fd=$REPLY
zpty -w shell "source ${(q)setup} ${(q)fpath_dir} ${(q)scratch}"
await @@ready@@
for line; do
  zpty -w -n shell "$line"$'\C-x@'
  await @@captured@@
  print -r -- ${(pj:\t:)${(f)"$(<$scratch/matches)"}}
  if [[ -s $scratch/errors ]]; then
    print -ru2 -- "completing ${(q+)line}:"
    cat $scratch/errors >&2
  fi
done
zpty -d shell
"""


@pytest.fixture(scope="module")
def zsh(tmp_path_factory):
    """The generated _logflume on a directory of its own, and the setup file."""
    assert shutil.which("zsh"), "zsh is missing: bash deploy/system-deps.sh test installs it"
    out = subprocess.run(
        [sys.executable, "-m", "logflume", "completion", "zsh"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    root = tmp_path_factory.mktemp("zsh")
    (root / "functions").mkdir()
    (root / "functions" / "_logflume").write_text(out)
    (root / "setup.zsh").write_text(SETUP)
    return root


def complete(zsh, *lines: str) -> list[set[str]]:
    """What zsh offers after each of `lines`, typed in turn into one shell."""
    scratch = zsh / "scratch"
    scratch.mkdir(exist_ok=True)
    args = [str(zsh / "setup.zsh"), str(zsh / "functions"), str(scratch), *lines]
    result = subprocess.run(
        ["zsh", "-f", "-c", DRIVER, "driver", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=scratch,  # a directory with no file named like a match
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    got = result.stdout.split("\n")[:-1]
    assert len(got) == len(lines), result.stdout
    return [set(filter(None, words.split("\t"))) for words in got]


def test_the_stand_in_tells_the_compadd_calls_that_add_matches():
    """The harness itself: compadd's options parsed as compadd does, so that a call
    that only fills an array (-O, -A, -D) is not taken for matches offered."""
    calls = {
        "-Qf -p /tmp/ - a b": True,
        "-J group -X '-O is a word here' - a": True,
        "-2 -o nosort -J group -d descriptions -l -a names": True,
        "-o foo -O arr bar": True,  # not an order: foo and what follows are the words
        "-E 2 -1 -V group -- -O a": True,
        "-2 -o nosort -D strings -O matches - a b": False,
        "-o nu,rev -O arr a": False,
        "-QO arr a": False,
        "-Xexplanation -A arr a": False,
    }
    test = 'for call; do _logflume_test_adds "${(Q@)${(z)call}}" && print yes || print no; done'
    result = subprocess.run(
        ["zsh", "-f", "-c", CAPTURE + test, "zsh", *calls],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stderr == ""
    assert result.stdout.split() == ["yes" if adds else "no" for adds in calls.values()]


def test_the_script_is_a_zsh_completion_function(zsh):
    script = (zsh / "functions" / "_logflume").read_text()
    assert script.startswith("#compdef logflume\n")
    checked = subprocess.run(["zsh", "-n", str(zsh / "functions" / "_logflume")])
    assert checked.returncode == 0


def test_subcommands_and_their_actions(zsh):
    gr, every, agent, users, shells = complete(
        zsh,
        "logflume gr",
        "logflume ",
        "logflume agent ",
        "logflume users ",
        "logflume completion ",
    )
    assert gr == {"groups"}
    assert {"agent", "broker", "topics", "groups", "completion", "manpage"} <= every
    assert agent == {"run", "validate", "test-output", "top", "tap", "reference", "plugins"}
    assert users == {"add", "delete", "list"}
    assert shells == {"bash", "zsh"}


def test_flags_and_their_choices(zsh):
    flags, boo, to_e, output, levels, formats, compression = complete(
        zsh,
        "logflume groups --",
        "logflume topics --boo",
        "logflume groups --to-e",
        "logflume groups --output ",
        "logflume --log-level ",
        "logflume --log-format ",
        "logflume produce --compression z",
    )
    assert {"--describe", "--reset-offsets", "--to-earliest", "--output", "--help"} <= flags
    assert not [f for f in flags if not f.startswith("--")]
    assert boo == {"--bootstrap-server"}
    assert to_e == {"--to-earliest"}
    assert output == {"text", "json"}
    assert levels == {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
    assert formats == {"text", "json"}
    assert compression == {"zstd"}


def test_paths_complete_as_files_or_directories(zsh, tmp_path):
    (tmp_path / "pipelines.yaml").write_text("")
    (tmp_path / "pipes.d").mkdir()
    (tmp_path / "other").write_text("")
    config, env_file, reference, state_dir, data_dir, everything, key_value = complete(
        zsh,
        f"logflume agent run --config {tmp_path}/pip",
        f"logflume agent validate --env-file {tmp_path}/pip",
        f"logflume agent reference --output {tmp_path}/pip",
        f"logflume agent run --state-dir {tmp_path}/pip",
        f"logflume broker --data-dir {tmp_path}/",
        f"logflume agent run --config {tmp_path}/",
        f"logflume broker --set {tmp_path}/pip",  # KEY=VALUE: not a path
    )
    assert config == env_file == reference == {"pipelines.yaml", "pipes.d"}
    assert state_dir == data_dir == {"pipes.d"}
    assert everything == {"pipelines.yaml", "pipes.d", "other"}
    assert key_value == set()


def options_with_values(parser, path=("logflume",)):
    """(command line up to the subcommand, option, its action) for every option that
    takes a value, of the parser and every subparser under it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from options_with_values(sub, (*path, name))
        elif action.option_strings and action.nargs != 0 and action.help != argparse.SUPPRESS:
            yield " ".join(path), max(action.option_strings, key=len), action


def test_every_option_value_completes_without_an_error(zsh):
    """Each option's value, in every subcommand: no error from zsh (a metavar such as
    HOST:PORT once was run as a command), and an option with choices offers them."""
    options = list(options_with_values(build_parser()))
    assert len(options) > 50
    offered = complete(zsh, *(f"{command} {option} " for command, option, _ in options))
    for (command, option, action), matches in zip(options, offered, strict=True):
        if action.choices is not None:
            assert matches == {str(c) for c in action.choices}, f"{command} {option}"
