"""A shaped network of our own: one namespace per host, each joined
by a veth pair to a bridge in a switch namespace, every port shaped with tc tbf
in both directions (each host gets a full-duplex link of `rate` to the switch,
as on a switched cluster). Addresses are 10.214.0.<i+1>/24 inside the fabric's
own namespaces, so nothing outside them sees any of its traffic, and several
fabrics can exist at once. Needs root (CAP_NET_ADMIN) and `ip` and `tc`.

    with Fabric(hosts=5, rate="1gbit") as fabric:
        fabric.popen(2, ["prog", "--host", fabric.address(2)])

The benchmarks (bench/shaped_cluster.py) use the class; the launcher
(scripts/local_cluster.sh --link=RATE) the command line:

    python3 scripts/netfabric.py up TAG HOSTS RATE    # prints "NAMESPACE ADDRESS" per host
    python3 scripts/netfabric.py down TAG             # removes the fabric TAG made
    python3 scripts/netfabric.py check                # exit 1 and why, where none can be made
"""
import os
import re
import shutil
import subprocess
import sys


class FabricError(RuntimeError):
    pass


def _run(argv):
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise FabricError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def missing_tools():
    """The tools a fabric needs that are not installed, or why it cannot be made."""
    missing = [t for t in ("ip", "tc") if shutil.which(t) is None]
    if missing:
        return f"missing {' and '.join(missing)} (Debian package iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN)"
    return ""


# A tc rate: a number and a unit (kbit, mbit, gbit), as --link takes it.
RATE = re.compile(r"^[0-9]+(\.[0-9]+)?(kbit|mbit|gbit)$")


def _prefix(tag):
    """The names of fabric `tag`'s namespaces begin with this."""
    return f"sfb{tag}"


class Fabric:
    def __init__(self, hosts, rate="1gbit", tag=None):
        if hosts < 1 or hosts > 250:
            raise ValueError(f"a fabric has 1 to 250 hosts; asked for {hosts}")
        if rate and not RATE.match(rate):
            raise ValueError(f"a link rate is a number and kbit, mbit or gbit (e.g. 100mbit, 1gbit); got {rate!r}")
        self.hosts = hosts
        self.rate = rate
        self._prefix = _prefix(tag or f"{os.getpid() % 100000}")
        self.switch = f"{self._prefix}-sw"
        self._made = []

    def namespace(self, i):
        return f"{self._prefix}-h{i}"

    def address(self, i):
        return f"10.214.0.{i + 1}"

    def exec_prefix(self, i):
        return ["ip", "netns", "exec", self.namespace(i)]

    def popen(self, i, argv, **kwargs):
        return subprocess.Popen(self.exec_prefix(i) + list(argv), **kwargs)

    def open(self):
        """Makes the fabric (FabricError where it cannot; what was made is removed again)."""
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def _shape(self, ns, dev):
        # tbf: the rate, a 256 KiB bucket (passes TSO segments whole; a 1 Gb/s
        # TCP stream measured 0.96 Gb/s through it) and at most 20 ms queued.
        _run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", self.rate,
              "burst", "256kb", "latency", "20ms"])

    def _create(self):
        why = missing_tools()
        if why:
            raise FabricError(why)
        _run(["ip", "netns", "add", self.switch])
        self._made.append(self.switch)
        sw = ["ip", "netns", "exec", self.switch]
        _run(sw + ["ip", "link", "add", "br0", "type", "bridge"])
        _run(sw + ["ip", "link", "set", "br0", "up"])
        _run(sw + ["ip", "link", "set", "lo", "up"])
        for i in range(self.hosts):
            ns = self.namespace(i)
            _run(["ip", "netns", "add", ns])
            self._made.append(ns)
            port = f"p{i}"
            _run(sw + ["ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run(sw + ["ip", "link", "set", port, "master", "br0"])
            _run(sw + ["ip", "link", "set", port, "up"])
            inside = ["ip", "netns", "exec", ns]
            _run(inside + ["ip", "addr", "add", f"{self.address(i)}/24", "dev", "eth0"])
            _run(inside + ["ip", "link", "set", "eth0", "up"])
            _run(inside + ["ip", "link", "set", "lo", "up"])
            if self.rate:
                self._shape(ns, "eth0")          # host -> switch
                self._shape(self.switch, port)   # switch -> host

    def close(self):
        """Removes every namespace made (their veths and the bridge go with them)."""
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        self._made = []


def remove_fabric(tag):
    """Removes the namespaces of the fabric `tag` made (by its prefix); returns how many."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    prefix = f"{_prefix(tag)}-"
    names = [line.split()[0] for line in listed.splitlines() if line.split() and line.split()[0].startswith(prefix)]
    for ns in names:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
    return len(names)


def main(argv):
    usage = "usage: netfabric.py up TAG HOSTS RATE | down TAG | check"
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    if argv[0] == "check" and len(argv) == 1:
        why = missing_tools()
        if why:
            print(why)
            return 1
        return 0
    if argv[0] == "down" and len(argv) == 2:
        remove_fabric(argv[1])
        return 0
    if argv[0] == "up" and len(argv) == 4:
        tag, hosts, rate = argv[1], argv[2], argv[3]
        if not re.match(r"^[A-Za-z0-9]{1,8}$", tag):
            print(f"netfabric: a tag is 1 to 8 letters and digits; got {tag!r}", file=sys.stderr)
            return 2
        if not hosts.isdigit():
            print(f"netfabric: HOSTS must be a number; got {hosts!r}", file=sys.stderr)
            return 2
        try:
            fabric = Fabric(int(hosts), rate, tag)
        except ValueError as e:  # a bad argument
            print(f"netfabric: {e}", file=sys.stderr)
            return 2
        try:
            fabric.open()
        except FabricError as e:  # the machine cannot make it
            print(f"netfabric: {e}", file=sys.stderr)
            return 1
        for i in range(fabric.hosts):
            print(fabric.namespace(i), fabric.address(i))
        return 0
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
