"""The fleet lab: web hosts as a platform team deploys them, a secured cluster, Spark.

Everything runs in namespaces of one `NetLab` (testkit/netns.py), on one bridge:

    zk, b0, b1, b2   ZooKeeper and three brokers. Listener PLAINTEXT :9092 carries
                     replication and the lab's own administration (User:ANONYMOUS,
                     a super user); SASL_SSL :9093 (SCRAM-SHA-512, a trial CA) is the
                     one web hosts and Spark use. The AclAuthorizer is on.
    client           the test's own clients (admin, checking consumers).
    web-1 .. web-N   a web host: its own network, UTS (host name `web-<i>`) and mount
                     namespaces; in the last, /var/log/nginx is the host's own
                     directory. It runs a real nginx logging there, a load generator
                     (testkit/loadgen.py) and the logflume agent, installed by
                     deploy/install-agent.sh from the built wheel into the host's own
                     prefix with the production template deploy/agent/pipelines.yaml
                     as it ships. The lab then does what deploy/README.md tells an
                     operator to: fill agent.env, `agent validate --env-file`, start
                     the agent with agent.env as its environment (the unit's
                     EnvironmentFile). Each host logs in as its own SCRAM user (its
                     host name) holding exactly the ACLs its agent needs, and its
                     firewall refuses the brokers' PLAINTEXT port.
    spark            a Spark standalone master and two workers (testkit/spark_cluster),
                     the ETL drivers.

The independent count is nginx's own access log of each host: `access_lines()`.
Needs root, iproute2, iptables, nginx, util-linux (unshare, nsenter) and Java.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from common import certs
from common.audit import AUDIT_PARTITIONS, AUDIT_TOPIC_CONFIG
from common.topic_names import AUDIT_TOPIC, POSITIONS_TOPIC, dead_letter_topic
from testkit import loadgen
from testkit.netns import NetLab, NetnsCluster, Node
from testkit.procs import wait_until
from testkit.spark_cluster import JVM_OPTIONS, SparkStandalone, driver_env

REPO = Path(__file__).resolve().parents[1]
SASL_PORT = 9093
NGINX_PORT = 8080
AGENT_METRICS = "127.0.0.1:8286"  # the template's metrics listener, in each host's netns
ADMIN_SETTINGS = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
    "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    "ssl.keystore.type": "PEM",
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "group.initial.rebalance.delay.ms": 0,
    "auto.create.topics.enable": "false",
}
SPARK_USER, SPARK_PASSWORD = "spark", "spark-secret"
# The ETL drivers': no driver UI (port 4040 of every interface), executors smaller
# than Spark's 1g, JVMs that start quickly (testkit.spark_cluster.JVM_OPTIONS).
SPARK_CONF = (
    "spark.ui.enabled=false",
    "spark.executor.memory=512m",
    f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
    f"spark.executor.extraJavaOptions={JVM_OPTIONS}",
)
# The topics of deploy/agent/pipelines.yaml: (name, partitions, config).
AGENT_TOPICS: tuple[tuple[str, int, dict[str, str]], ...] = (
    ("nginx-access", 3, {}),
    ("nginx-error", 1, {}),
    ("netcat", 1, {}),
    (dead_letter_topic("nginx-access"), 1, {}),
    (dead_letter_topic("nginx-error"), 1, {}),
    (dead_letter_topic("netcat"), 1, {}),
    (POSITIONS_TOPIC, 1, {"cleanup.policy": "compact"}),
    (AUDIT_TOPIC, AUDIT_PARTITIONS, AUDIT_TOPIC_CONFIG),
)
STATS_TOPIC = ("nginx-stats", 1, {"cleanup.policy": "compact"})  # the realtime job's rows
NGINX_CONF = """\
user root;
daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log /var/log/nginx/error.log error;
events {{ worker_connections 256; }}
http {{
    default_type application/octet-stream;
    access_log /var/log/nginx/access.log combined;
    client_body_temp_path {root}/tmp/body;
    proxy_temp_path {root}/tmp/proxy;
    fastcgi_temp_path {root}/tmp/fastcgi;
    uwsgi_temp_path {root}/tmp/uwsgi;
    scgi_temp_path {root}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root}/www;
        location = /boom {{ return 500; }}
        location = /moved {{ return 301 /static/s1; }}
    }}
}}
"""


def build_wheel(out: Path) -> Path:
    """A wheel of this tree in `out`, built offline (`pip wheel --no-deps
    --no-build-isolation`). The build writes into the checkout (build/, *.egg-info),
    so concurrent builds (the two test workers) take turns on a lock file."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    with open(Path(sys.prefix) / "wheel-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = subprocess.run(
            [*cmd, "-w", str(out), str(REPO)], capture_output=True, text=True, timeout=300
        )
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = out.glob("logflume-*.whl")
    return path


def _tool(name: str) -> str:
    path = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if path is None:
        raise RuntimeError(f"the fleet lab needs `{name}` (bash deploy/system-deps.sh)")
    return path


@dataclass
class WebHost:
    """One web host of the lab. `run` starts a command inside all its namespaces."""

    name: str
    node: Node
    root: Path
    user: str
    password: str
    anchor: subprocess.Popen | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    agent_kills: int = 0  # SIGKILLs of its agent (kill_agent) so far

    @property
    def prefix(self) -> Path:
        return self.root / "opt"

    @property
    def etc(self) -> Path:
        return self.prefix / "etc/logflume"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    @property
    def state_dir(self) -> Path:
        return self.prefix / "var/lib/logflume/agent-web"

    def command(self, cmd: list[str]) -> list[str]:
        assert self.anchor is not None, f"{self.name}: namespaces not set up"
        ns = ["--target", str(self.anchor.pid), "--net", "--uts", "--mount"]
        return [_tool("nsenter"), *ns, "--", *cmd]

    def run(self, what: str, cmd: list[str], env: dict | None = None) -> subprocess.Popen:
        """Start `cmd` in the host as process `what` (its output in <root>/<what>.log)."""
        with open(self.root / f"{what}.log", "ab") as out:
            proc = subprocess.Popen(
                self.command(cmd),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        self.procs[what] = proc
        return proc

    def check(self, cmd: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(cmd), capture_output=True, text=True, timeout=60, env=env
        )

    def access_lines(self) -> list[str]:
        """Every line nginx wrote to this host's access log, rotated files first
        (logrotate's access.log.N, the highest N the oldest)."""
        return self._lines("access.log")

    def error_lines(self) -> list[str]:
        return self._lines("error.log")

    def _lines(self, name: str) -> list[str]:
        rotated = sorted(self.log_dir.glob(f"{name}.*"), key=lambda p: -int(p.suffix[1:]))
        lines = []
        for path in [*rotated, self.log_dir / name]:
            if path.exists():
                lines += path.read_text().splitlines()
        return lines


class Fleet:
    """The lab: `start()`; `close()` tears it all down."""

    def __init__(self, root: Path, hosts: int, wheel: Path, wheelhouse: Path):
        self.root = Path(root)
        self.wheel = wheel
        self.wheelhouse = wheelhouse
        self.lab = NetLab()
        self.ca = certs.new_ca()
        self.ca_file = certs.write_ca(self.root / "certs", self.ca)
        self.cluster = NetnsCluster(
            self.lab, self.root / "cluster", settings={}, listeners={"SASL_SSL": SASL_PORT}
        )
        self.hosts = [self._add_host(i) for i in range(1, hosts + 1)]
        self.lab.add("spark")
        self.spark: SparkStandalone | None = None

    def _add_host(self, i: int) -> WebHost:
        name = f"web-{i}"
        node = self.lab.add(name)
        return WebHost(name, node, self.root / name, user=name, password=f"{name}-secret")

    def start(self) -> None:
        """Everything, overlapped where nothing depends on it: the cluster and the Spark
        cluster start while the web hosts install the agent (pip, the slow part);
        then each host's nginx and agent, which need the cluster."""
        with ThreadPoolExecutor(1) as pool:
            services = pool.submit(self._start_services)
            try:
                self.install_hosts()
            finally:
                services.result()
        self.start_agents()

    def _start_services(self) -> None:
        self.start_cluster()
        self.start_spark()

    # -- the cluster --------------------------------------------------------------------

    @property
    def plain(self) -> str:
        return self.cluster.bootstrap

    @property
    def sasl_ssl(self) -> str:
        return self.cluster.bootstrap_of("SASL_SSL")

    def client_properties(self, user: str, password: str) -> str:
        """A Kafka client properties file's text (for --command-config) as `user`."""
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";'
        )
        return (
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.jaas.config={jaas}\n"
            f"ssl.truststore.location={self.ca_file}\nssl.truststore.type=PEM\n"
        )

    def start_cluster(self) -> None:
        ips = [self.lab.ip(f"b{i}") for i in range(self.cluster.count)]
        pem = certs.write_keystore(
            self.root / "certs", "broker", certs.issue(self.ca, "broker", hosts=ips, server=True)
        )
        self.cluster.settings.update(ADMIN_SETTINGS, **{"ssl.keystore.location": str(pem)})
        with self.lab.inside("client"):
            self.cluster.start()
            self._provision()

    def admin(self):
        """An AdminClient over PLAINTEXT (super user); use it inside `lab.inside("client")`."""
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.plain})

    def _provision(self) -> None:
        """Topics, SCRAM users and ACLs: each host's user gets what its agent needs."""
        from confluent_kafka.admin import (
            NewTopic,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = self.admin()
        topics = [NewTopic(n, p, 3, config=c) for n, p, c in (*AGENT_TOPICS, STATS_TOPIC)]
        for f in admin.create_topics(topics, request_timeout=30).values():
            f.result(60)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        users = [(h.user, h.password) for h in self.hosts] + [(SPARK_USER, SPARK_PASSWORD)]
        upserts = [UserScramCredentialUpsertion(u, info, pw.encode()) for u, pw in users]
        for f in admin.alter_user_scram_credentials(upserts).values():
            f.result(30)
        bindings = [b for h in self.hosts for b in agent_acls(h.user, h.name)]
        for f in admin.create_acls(bindings + spark_acls(SPARK_USER)).values():
            f.result(30)

    # -- Spark ----------------------------------------------------------------------------

    def start_spark(self) -> SparkStandalone:
        """A master and two workers in the `spark` namespace."""
        self.spark = SparkStandalone(
            self.root / "spark",
            host=self.lab.ip("spark"),
            popen=lambda cmd, log, env: self.lab.popen("spark", cmd, log, env=env),
        )
        with self.lab.inside("spark"):
            self.spark.start()
        return self.spark

    def etl(self, job: str, out: Path, *extra: str) -> subprocess.Popen:
        """`logflume etl <job>` on the Spark cluster as a scheduler starts it, logged
        in as the Spark user; its output in <root>/<job>.log."""
        assert self.spark is not None, "start_spark() first"
        props = self.root / "spark.properties"
        props.write_text(self.client_properties(SPARK_USER, SPARK_PASSWORD))
        cmd = [sys.executable, "-m", "logflume", "etl", job, "--master", self.spark.master_url]
        cmd += ["--bootstrap-server", self.sasl_ssl, "--command-config", str(props)]
        cmd += ["--topic", "nginx-access", "--output", str(out), "--checkpoint", f"{out}-ckpt"]
        for setting in SPARK_CONF:
            cmd += ["--conf", setting]
        return self.lab.popen(
            "spark", cmd + list(extra), self.root / f"{job}.log", env=driver_env()
        )

    # -- web hosts ----------------------------------------------------------------------

    def install_hosts(self) -> None:
        """Each host's namespaces, then the agent installed into it."""
        for host in self.hosts:
            self._boot(host)
        with ThreadPoolExecutor(2) as pool:  # pip is CPU-bound: two at a time, two cores
            list(pool.map(self.install, self.hosts))

    def start_agents(self) -> None:
        """Each host's nginx, its agent.env filled and validated, its agent started."""
        for host in self.hosts:
            self.start_nginx(host)
            self.configure(host)
            self.start_agent(host)

    def _boot(self, host: WebHost) -> None:
        """The host's namespaces, held by a sleeping anchor process: a UTS namespace
        named after it, a mount namespace where /var/log/nginx is its own log dir, a
        firewall refusing the brokers' PLAINTEXT port."""
        for d in (host.log_dir, host.root / "nginx/tmp", host.root / "nginx/www/static"):
            d.mkdir(parents=True, exist_ok=True)
        Path("/var/log/nginx").mkdir(parents=True, exist_ok=True)
        script = (
            'hostname "$0" && mount --bind "$1" /var/log/nginx && echo ready && exec sleep infinity'
        )
        cmd = [self.lab.ip_cmd, "netns", "exec", host.node.ns, _tool("unshare"), "--uts"]
        cmd += ["--mount", "--propagation", "private", "--", "sh", "-c", script]
        host.anchor = subprocess.Popen(
            [*cmd, host.name, str(host.log_dir)], stdout=subprocess.PIPE, start_new_session=True
        )
        self.lab.procs.append(host.anchor)
        assert host.anchor.stdout is not None  # a pipe
        assert host.anchor.stdout.readline() == b"ready\n", f"{host.name}: namespaces not set up"
        iptables = self.lab.iptables
        res = host.check([iptables, "-A", "OUTPUT", "-p", "tcp", "--dport", "9092", "-j", "REJECT"])
        assert res.returncode == 0, res.stderr
        for path, body in loadgen.site_files().items():
            (host.root / "nginx/www" / path).write_bytes(body)

    def install(self, host: WebHost) -> None:
        """deploy/install-agent.sh, a trial install into the host's prefix, offline."""
        cmd = ["bash", str(REPO / "deploy/install-agent.sh"), "--prefix", str(host.prefix)]
        cmd += [
            "--wheel",
            str(self.wheel),
            "--pip-args",
            f"--no-index --find-links {self.wheelhouse}",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, (
            f"{host.name}: install-agent.sh failed:\n{res.stdout}{res.stderr}"
        )

    def start_nginx(self, host: WebHost) -> None:
        conf = host.root / "nginx/nginx.conf"
        conf.write_text(NGINX_CONF.format(root=host.root / "nginx", port=NGINX_PORT))
        self._run(host, "nginx", [_tool("nginx"), "-p", str(host.root / "nginx"), "-c", str(conf)])
        with self.lab.inside(host.name):
            wait_until(
                lambda: _http_ok(f"http://127.0.0.1:{NGINX_PORT}/static/s0"),
                timeout=30,
                what=f"{host.name}'s nginx",
            )

    def settings(self, host: WebHost) -> dict[str, str]:
        """What the operator writes into the host's agent.env."""
        return {
            "LOGFLUME_BOOTSTRAP_SERVERS": self.sasl_ssl,
            "LOGFLUME_SASL_USERNAME": host.user,
            "LOGFLUME_SASL_PASSWORD": host.password,
            "LOGFLUME_TLS_CA": str(self.ca_file),
        }

    def configure(self, host: WebHost) -> None:
        """Fill agent.env, then `agent validate --env-file`: it must pass."""
        env_file = host.etc / "agent.env"
        text = env_file.read_text() if env_file.exists() else ""
        env_file.write_text(text + "".join(f"{k}={v}\n" for k, v in self.settings(host).items()))
        res = host.check(
            self.logflume(host, "validate") + ["--env-file", str(env_file)], env=self._env()
        )
        assert res.returncode == 0, f"{host.name}: agent validate failed:\n{res.stdout}{res.stderr}"

    def logflume(self, host: WebHost, verb: str) -> list[str]:
        return [
            str(host.prefix / "bin/logflume"),
            "agent",
            verb,
            "--config",
            str(host.etc / "pipelines.yaml"),
        ]

    def _env(self, extra: dict | None = None) -> dict:
        """The environment of a systemd service: no HOST (the kernel's host name is
        the host's identity), plus the unit's EnvironmentFile."""
        env = {k: v for k, v in os.environ.items() if k not in ("HOST", "PYTHONPATH")}
        return env | {"PYTHONUNBUFFERED": "1"} | (extra or {})

    def start_agent(self, host: WebHost) -> None:
        """What `systemctl start logflume-agent@web` runs, agent.env as environment."""
        cmd = self.logflume(host, "run") + ["--name", "web", "--state-dir", str(host.state_dir)]
        self._run(host, "agent", cmd, env=self._env(self.settings(host)))
        with self.lab.inside(host.name):
            wait_until(
                lambda: _agent_healthy(host),
                timeout=90,
                what=lambda: (
                    f"{host.name}'s agent to be healthy:\n{_tail(host.root / 'agent.log')}"
                ),
                every=0.2,
            )

    def kill_agent(self, host: WebHost) -> None:
        proc = host.procs["agent"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        host.agent_kills += 1

    def stop_agent(self, host: WebHost, timeout: float = 60) -> int:
        proc = host.procs["agent"]
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout)

    def start_traffic(
        self,
        host: WebHost,
        rate: float,
        seconds: float,
        tail_rate: float,
        record: Path | None = None,
    ) -> None:
        """testkit/loadgen.py in `host`; `record`: where it writes its response times."""
        cmd = [sys.executable, "-m", "testkit.loadgen", "--port", str(NGINX_PORT)]
        cmd += ["--rate", str(rate), "--seconds", str(seconds), "--tail-rate", str(tail_rate)]
        cmd += ["--seed", host.name.split("-")[1]] + (["--record", str(record)] if record else [])
        self._run(host, "loadgen", cmd, env=os.environ | {"PYTHONPATH": str(REPO)})

    def stop_traffic(self) -> None:
        for host in self.hosts:
            proc = host.procs.get("loadgen")
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for host in self.hosts:
            if "loadgen" in host.procs:
                host.procs["loadgen"].wait(30)

    def logrotate(self, host: WebHost, log: str, how: str) -> None:
        """Run the real logrotate on /var/log/nginx/<log> in `host`: `how` is
        "rename" (create a new file, then nginx reopens its logs on SIGUSR1, as
        Debian's /etc/logrotate.d/nginx does) or "copytruncate"."""
        pid = (host.root / "nginx/nginx.pid").read_text().strip()
        action = (
            f"    create 0640 root root\n    postrotate\n        kill -USR1 {pid}\n    endscript\n"
            if how == "rename"
            else "    copytruncate\n"
        )
        conf = host.root / f"logrotate-{log}-{how}.conf"
        conf.write_text(f"/var/log/nginx/{log} {{\n    rotate 20\n    nocompress\n{action}}}\n")
        state = host.root / "logrotate.state"
        res = host.check([_tool("logrotate"), "--force", "--state", str(state), str(conf)])
        assert res.returncode == 0, f"{host.name}: logrotate failed: {res.stderr}"

    def set_audit_drill(self, host: WebHost, sink: str, drill: str) -> None:
        """Edit the host's pipelines.yaml as an operator would: `sink` gets
        `audit_drill: <drill>` (YAML flow mapping); restart the agent with it."""
        conf = host.etc / "pipelines.yaml"
        lines = conf.read_text().splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if line.strip() == f"{sink}:")
        indent = len(lines[at + 1]) - len(lines[at + 1].lstrip())
        lines.insert(at + 1, f"{' ' * indent}audit_drill: {drill}\n")
        conf.write_text("".join(lines))
        assert self.stop_agent(host) == 0
        self.start_agent(host)

    def udp_line(self, host: WebHost, text: str) -> None:
        """What the README tells a user to try: `echo ... | nc -u -w1 127.0.0.1 8285`."""
        res = host.check(["sh", "-c", 'echo "$0" | nc -u -w1 127.0.0.1 8285', text])
        assert res.returncode == 0, res.stderr

    def records(self, topic: str, timeout: float = 120) -> list:
        """Every committed record of `topic` (read_committed), read as the super user."""
        from confluent_kafka import Consumer, Message, TopicPartition

        with self.lab.inside("client"):
            consumer = Consumer(
                {
                    "bootstrap.servers": self.plain,
                    "group.id": "fleet-check",
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                    "enable.auto.commit": False,
                }
            )
            try:
                meta = consumer.list_topics(topic, timeout=30).topics[topic]
                partitions = len(meta.partitions)
                consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
                records: list[Message] = []
                done: set[int | None] = set()  # partitions read to their end
                deadline = time.monotonic() + timeout
                while len(done) < partitions:
                    assert time.monotonic() < deadline, f"{topic}: reading did not reach the end"
                    for msg in consumer.consume(5000, 1.0):
                        err = msg.error()
                        if err is None:
                            records.append(msg)
                        elif err.code() == err._PARTITION_EOF:
                            done.add(msg.partition())
                        else:
                            raise AssertionError(f"{topic}: {err}")
                return records
            finally:
                consumer.close()

    def audit(self, *args: str) -> tuple[int, dict]:
        """`logflume audit --format json` as the super user, as an operator runs it:
        (exit status, its report)."""
        cmd = [sys.executable, "-m", "logflume", "audit", "--bootstrap-server", self.plain]
        with self.lab.inside("client"):
            res = subprocess.run(
                [*cmd, "--format", "json", *args], capture_output=True, text=True, timeout=300
            )
        assert res.returncode in (0, 3) and res.stdout, res.stderr
        return res.returncode, json.loads(res.stdout)

    def try_as(self, host: WebHost) -> dict[str, str]:
        """What the broker answers `host`'s user, from the host, for a few things
        its agent needs and some it does not."""
        from confluent_kafka import Consumer, KafkaException, Producer

        login = {
            "bootstrap.servers": self.sasl_ssl,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": host.user,
            "sasl.password": host.password,
            "ssl.ca.location": str(self.ca_file),
        }
        out = {}

        def produce(topic: str) -> str:
            results = []
            producer = Producer(login | {"message.timeout.ms": 20000})
            producer.produce(topic, b"probe", on_delivery=lambda err, _m: results.append(err))
            producer.flush(30)
            return "ok" if results == [None] else _error_name(results[0])

        with self.lab.inside(host.name):
            dead_letters = dead_letter_topic("nginx-access")
            out[f"write {dead_letters}"] = produce(dead_letters)
            other = next(h for h in self.hosts if h is not host)
            txn = Producer(login | {"transactional.id": f"logflume-{other.name}-web-access-kafka"})
            try:
                txn.init_transactions(30)
                out["write another host's transactional id"] = "ok"
            except KafkaException as exc:
                out["write another host's transactional id"] = _error_name(exc.args[0])
            out["read nginx-access"] = _read_verdict(Consumer(login | {"group.id": "probe"}))
            meta = Producer(login).list_topics("nginx-access-copy", timeout=30)
            error = meta.topics["nginx-access-copy"].error
            out["see a topic of its own choosing"] = "ok" if error is None else _error_name(error)
            try:
                socket.create_connection((self.lab.ip("b0"), 9092), timeout=5).close()
                out["reach the PLAINTEXT listener"] = "connected"
            except ConnectionRefusedError:
                out["reach the PLAINTEXT listener"] = "refused"
        return out

    def _run(self, host: WebHost, what: str, cmd: list[str], env: dict | None = None) -> None:
        """`host.run`, the process also the lab's, so that `close` kills it."""
        self.lab.procs.append(host.run(what, cmd, env=env))

    def close(self) -> None:
        if self.spark is not None:
            self.spark.stop()
        self.lab.close()


def _read_verdict(consumer) -> str:
    """Reading partition 0 of nginx-access, assigned (no group join): "ok" or the
    first error other than the group lookup's (the group is not used)."""
    from confluent_kafka import KafkaError, TopicPartition

    try:
        consumer.assign([TopicPartition("nginx-access", 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error() is None:
                return "ok"
            if msg.error().code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
                return _error_name(msg.error())
        return "nothing within 30 s"
    finally:
        consumer.close()


def _error_name(err) -> str:
    """Kafka's name of a KafkaError's code (librdkafka's own codes: its text)."""
    from confluent_kafka import KafkaError

    names = {v: k for k, v in vars(KafkaError).items() if k.isupper() and isinstance(v, int)}
    return names.get(err.code(), err.str())


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (OSError, urllib.error.HTTPError):
        return False


def _agent_healthy(host: WebHost) -> bool:
    proc = host.procs["agent"]
    if proc.poll() is not None:
        raise AssertionError(
            f"{host.name}'s agent exited with {proc.returncode}:\n{_tail(host.root / 'agent.log')}"
        )
    return _http_ok(f"http://{AGENT_METRICS}/health")


def _tail(path: Path, lines: int = 30) -> str:
    return (
        "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""
    )


def _allow(principal: str, grants: list[tuple]) -> list:
    """AclBindings allowing `principal` each (resource type, name, pattern, operation),
    the types given by their names in confluent-kafka's enums."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    allow = AclPermissionType.ALLOW
    return [
        AclBinding(
            ResourceType[t], n, ResourcePatternType[p], principal, "*", AclOperation[o], allow
        )
        for t, n, p, o in grants
    ]


def agent_acls(user: str, host: str) -> list:
    """Exactly what the production template's agent needs: write its topics, their
    dead-letter topics and the audit topic, read and write the positions topic, its
    own transactional ids (logflume-<host>-web-<sink>)."""
    grants = []
    for topic, _, _ in AGENT_TOPICS:
        ops = ("WRITE", "DESCRIBE", "READ") if topic == POSITIONS_TOPIC else ("WRITE", "DESCRIBE")
        grants += [("TOPIC", topic, "LITERAL", op) for op in ops]
    txn = f"logflume-{host}-web-"
    grants += [("TRANSACTIONAL_ID", txn, "PREFIXED", op) for op in ("WRITE", "DESCRIBE")]
    return _allow(f"User:{user}", grants)


def spark_acls(user: str) -> list:
    """The ETL jobs' user, as deploy/README.md grants it: consume the access-log
    topic with the data source's groups (logflume-spark...), write the realtime
    job's rows and both jobs' audit totals."""
    return _allow(
        f"User:{user}",
        [
            ("TOPIC", "nginx-access", "LITERAL", "READ"),
            ("GROUP", "logflume-spark", "PREFIXED", "READ"),
            ("TOPIC", STATS_TOPIC[0], "LITERAL", "WRITE"),
            ("TOPIC", STATS_TOPIC[0], "LITERAL", "DESCRIBE"),
            ("TOPIC", AUDIT_TOPIC, "LITERAL", "WRITE"),
            ("TOPIC", AUDIT_TOPIC, "LITERAL", "DESCRIBE"),
        ],
    )
