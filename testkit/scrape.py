"""Reading a /metrics endpoint in tests and benchmarks, with prometheus_client's parser."""

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


class Samples:
    """One scrape: every sample by name and labels."""

    def __init__(self, text: str):
        self.text = text
        self._values: dict[tuple[str, frozenset], float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                self._values[(s.name, frozenset(s.labels.items()))] = s.value

    def get(self, name: str, **labels: str) -> float | None:
        """The value of the sample `name` with exactly `labels`, None when absent."""
        return self._values.get((name, frozenset(labels.items())))

    def sum(self, name: str, **labels: str) -> float:
        """The sum of `name` over the samples whose labels include `labels`."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self._values.items() if n == name and wanted <= ls)

    def names(self) -> set[str]:
        return {n for n, _ in self._values}


def scrape(port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> Samples:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as r:
        return Samples(r.read().decode())
