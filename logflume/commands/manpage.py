"""`logflume manpage`: print the logflume(1) manual page (roff) on stdout.

Generated (by argparse-manpage) from the argparse definitions, so it documents every
subcommand and flag of this version. `deploy/install-agent.sh` installs it; by hand:

    logflume manpage > /usr/local/share/man/man1/logflume.1
"""

FILES = r""".TP
.B /etc/logflume/pipelines.yaml
agents, their sources, channels and sinks (\fBlogflume agent reference\fR lists every key)
.TP
.B /etc/logflume/agent.env
the agent unit's EnvironmentFile: NAME=value lines for ${NAME} in pipelines.yaml
(\fBlogflume agent validate \-\-env\-file\fR checks the two together)
.TP
.B /etc/logflume/broker-ID.properties
a broker's configuration (logflume-broker@ID.service), Kafka's server.properties syntax
(\fBlogflume broker \-\-reference\fR lists every key)
.TP
.B /var/lib/logflume
agent positions and channels, broker data, ETL checkpoints"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "manpage",
        help="print the manual page",
        description="Print the logflume(1) manual page (roff) on stdout.",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from importlib.metadata import PackageNotFoundError, version

    from argparse_manpage.manpage import Manpage

    from logflume.cli import build_parser

    try:
        release = version("logflume")
    except PackageNotFoundError:
        release = ""
    page = Manpage(
        build_parser(),
        _data={
            "project_name": "logflume",
            "version": release,
            "manual_section": "1",
            "manual_title": "logflume manual",
            "description": "log pipeline: agents, a Kafka-compatible broker and Spark ETL",
        },
    )
    page.add_section("files", "=", FILES)
    page.add_section("see also", "=", r"\fBnc\fR(1), \fBsystemd.service\fR(5)")
    print(quote_text_lines(str(page)), end="")
    return 0


def quote_text_lines(roff: str) -> str:
    """A help text line starting with an apostrophe would be read by groff as a
    no-break control line (and vanish with a warning): argparse-manpage writes help
    text as it is, so such lines get the zero-width `\\&` in front. Lines starting
    with a period are left alone: argparse-manpage's own macros start with one."""
    return "\n".join("\\&" + line if line.startswith("'") else line for line in roff.split("\n"))
