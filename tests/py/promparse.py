"""A strict reader of the Prometheus text exposition format (0.0.4), for the
tests of the /metrics endpoints.

Stricter than a scraper on purpose, so that a page a scraper would take with
a shrug still fails a test: every family has its # HELP then its # TYPE line
before its samples, and its samples follow without another family between
them; names and label names are well formed, label values escaped, no
series appears twice; counters end in _total and are never negative; gauges
do not end in _total; a histogram's buckets are cumulative and its +Inf
bucket equals its _count; a summary's quantiles lie in [0, 1].  The page is
also read with the official client's parser (python3-prometheus-client),
which must agree on every sample.
"""
import math
import re

from prometheus_client.parser import text_string_to_metric_families

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
TYPES = {"counter", "gauge", "summary", "histogram", "untyped"}
SAMPLE = re.compile(rf"({NAME})(?:\{{(.*)\}})? (\S+)")
PAIR = re.compile(rf'({LABEL})="((?:[^"\\\n]|\\[\\"n])*)"')


class PageError(AssertionError):
    pass


def parse_value(text):
    if text in ("NaN", "+Inf", "-Inf"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", text):
        raise PageError(f"not a value: {text!r}")
    return float(text)


def parse_labels(text, line):
    labels = {}
    pos = 0
    while pos < len(text):
        m = PAIR.match(text, pos)
        if not m:
            raise PageError(f"bad labels in {line!r}")
        name = m.group(1)
        if name in labels or name.startswith("__"):
            raise PageError(f"label {name} repeated or reserved in {line!r}")
        labels[name] = re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1),
                              m.group(2))
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise PageError(f"labels not separated by ',' in {line!r}")
            pos += 1
            if pos == len(text):
                raise PageError(f"trailing ',' in {line!r}")
    return labels


def family_of(name, families):
    """The family a sample name belongs to (with its _sum/_count/_bucket)."""
    if name in families and families[name]["type"] != "histogram":
        return name
    for suffix in ("_sum", "_count", "_bucket"):
        base = name[: -len(suffix)] if name.endswith(suffix) else None
        if base in families:
            kind = families[base]["type"]
            if kind == "histogram" or (kind == "summary" and suffix != "_bucket"):
                return base
    raise PageError(f"sample {name} belongs to no family declared before it")


def check_family(name, fam):
    kind = fam["type"]
    if kind == "counter" and not name.endswith("_total"):
        raise PageError(f"counter {name} does not end in _total")
    if kind != "counter" and name.endswith("_total"):
        raise PageError(f"{kind} {name} ends in _total (reserved for counters)")
    for sname, labels, value in fam["samples"]:
        if kind == "counter" and not value >= 0:
            raise PageError(f"counter {sname} is {value}")
        if kind == "summary" and sname == name:
            if not 0 <= float(labels.get("quantile", "nan")) <= 1:
                raise PageError(f"{sname} without a quantile in [0, 1]: {labels}")
        if kind == "histogram" and (sname.endswith("_bucket")) != ("le" in labels):
            raise PageError(f"{sname}: le belongs on buckets, and only there: {labels}")
    if kind != "histogram":
        return
    groups = {}
    for sname, labels, value in fam["samples"]:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        groups.setdefault(rest, []).append((sname[len(name):], labels.get("le"), value))
    for rows in groups.values():
        buckets = [(le, v) for suffix, le, v in rows if suffix == "_bucket"]
        bounds = [math.inf if le == "+Inf" else float(le) for le, _ in buckets]
        counts = [v for _, v in buckets]
        if not bounds or bounds != sorted(bounds) or bounds[-1] != math.inf:
            raise PageError(f"{name}: buckets not ascending to +Inf: {bounds}")
        if counts != sorted(counts):
            raise PageError(f"{name}: buckets not cumulative: {counts}")
        if [v for suffix, _, v in rows if suffix == "_count"] != [counts[-1]]:
            raise PageError(f"{name}: the +Inf bucket {counts[-1]} is not the _count")


def parse(text):
    """Parses a page; returns {family: {"type", "help", "samples": [(name,
    labels, value)]}} in page order, or raises PageError naming the line."""
    if not text.endswith("\n"):
        raise PageError("the page does not end with a newline")
    families = {}
    current = None
    seen = set()
    pending_help = None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not re.fullmatch(NAME, parts[2]) or parts[2] in families:
                raise PageError(f"bad or repeated HELP: {line!r}")
            if re.search(r"\\[^\\n]", parts[3]):
                raise PageError(f"bad escape in HELP: {line!r}")
            pending_help = (parts[2], parts[3])
            current = None
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[3] not in TYPES or pending_help is None \
                    or pending_help[0] != parts[2]:
                raise PageError(f"TYPE without its HELP just before: {line!r}")
            current = parts[2]
            families[current] = {"type": parts[3], "help": pending_help[1], "samples": []}
            pending_help = None
            continue
        if line.startswith("#") or line == "":
            raise PageError(f"unexpected line: {line!r}")
        m = SAMPLE.fullmatch(line)
        if not m:
            raise PageError(f"not a sample: {line!r}")
        name, labels = m.group(1), parse_labels(m.group(2) or "", line)
        if current is None or family_of(name, families) != current:
            raise PageError(f"sample outside its family's block: {line!r}")
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise PageError(f"series repeated: {line!r}")
        seen.add(key)
        families[current]["samples"].append((name, labels, parse_value(m.group(3))))
    for name, fam in families.items():
        check_family(name, fam)
    # The official parser must read the same samples.
    theirs = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for f in text_string_to_metric_families(text) for s in f.samples}
    ours = {(n, tuple(sorted(lab.items()))): v
            for fam in families.values() for n, lab, v in fam["samples"]}
    if set(theirs) != set(ours):
        raise PageError(f"the official parser disagrees: {set(theirs) ^ set(ours)}")
    for k, v in ours.items():
        if not (v == theirs[k] or (math.isnan(v) and math.isnan(theirs[k]))):
            raise PageError(f"the official parser reads {k} as {theirs[k]}, not {v}")
    return families


def samples(families):
    """{(name, frozenset(labels)): value} of every sample."""
    return {(n, frozenset(lab.items())): v
            for fam in families.values() for n, lab, v in fam["samples"]}


def value(families, name, **labels):
    """The value of one series (labels given exactly); KeyError if absent."""
    return samples(families)[(name, frozenset(labels.items()))]


def counters_never_went_down(before, after):
    """The counter series of before whose value is lower in after (or gone)."""
    later = samples(after)
    bad = []
    for fname, fam in before.items():
        if fam["type"] != "counter":
            continue
        for n, lab, v in fam["samples"]:
            now = later.get((n, frozenset(lab.items())))
            if now is None or now < v:
                bad.append((n, lab, v, now))
    return bad
