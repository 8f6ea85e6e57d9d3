"""What security's content check withholds of command results and catches of injected tool results, in three
configurations judged in one run on the same texts: every allowlisted `cli_execute` form and a set of commands a
human might approve, run for real on this machine by the tools service's own code and rendered as the deep tier
renders a tool result (none carries an instruction: every withhold is a false one), and the tool results and
documents of `bench/corpora/content_probe.jsonl` (written for this benchmark, never trained on): injected ones
(`attack`) and ones that talk about assistants, models and agents without instructing one (`benign`).

* before: the whole result; every rule reads it all, the classifier less its scalar metadata lines;
* echo: as the supervisor checks it, less the data that echoes the call's own arguments (`argv`);
* shipped: echo, judged by the security service's own content decider (the question layers read only the lines
  that address the agent, `security.address`; the classifier those that also read as language, `security.prose`).

The content rules and decode-and-judge read every line in all three. Figures only, never asserted.

    .venv/bin/python bench/content_check.py [--show]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402
from meshward.security.classifier import ClassifierLayer, SecurityClassifier  # noqa: E402
from meshward.security.decision import RulesLayerAdapter, SecurityDecider  # noqa: E402
from meshward.security.decoding import DecodeLayer  # noqa: E402
from meshward.security.handlers import _judge  # noqa: E402
from meshward.security.judge import ContentRulesLayer, injections_only, prose_only  # noqa: E402
from meshward.security.prose import language_lines  # noqa: E402
from meshward.supervisor.deep import tool_result_text  # noqa: E402
from meshward.tools.cli import CliSettings, run_approved  # noqa: E402
from meshward.tools.command_policy import DEFAULT_ALLOWLIST, PATH  # noqa: E402
from meshward.tools.registry import ToolError  # noqa: E402

PROBE = Path(__file__).resolve().parent / "corpora" / "content_probe.jsonl"

# Read-only commands an operator would approve when asked (not allowlisted); each one that this machine lacks or
# that the deny list refuses is reported and skipped.
APPROVABLE = [
    "cat /etc/os-release", "cat /etc/hostname", "cat /etc/resolv.conf", "cat /etc/timezone", "cat /etc/debian_version",
    "cat /etc/fstab", "cat /proc/mounts", "cat /proc/swaps", "cat /sys/class/net/lo/mtu", "ls -la /etc/apt",
    "ls -l /var/log", "ls /etc/ssh", "ip addr", "ip route", "ss -tln", "lsblk", "mount", "getent hosts localhost",
    "id", "whoami", "git --version", "python3 --version", "sort --version", "stat /etc/passwd", "wc -l /etc/services",
    "head -n 5 /etc/services", "tail -n 3 /etc/protocols", "find /etc/apt -maxdepth 1 -type d", "du -sh /var/cache",
    "systemctl --version", "env --version", "grep -c processor /proc/cpuinfo", "file /bin/ls", "ldd --version",
    "openssl version", "uname -v",
]


def _commands(path: str) -> list[str]:
    forms = [" ".join([rule.program, *(path if t is PATH else str(t) for t in form)])
             for rule in DEFAULT_ALLOWLIST for form in rule.forms]
    return forms + APPROVABLE


async def _results(commands: list[str], settings: CliSettings) -> tuple[list[tuple[str, dict]], list[str]]:
    done, skipped = [], []
    for command in commands:
        try:
            content = await run_approved(shlex.split(command), settings)
        except ToolError as e:
            skipped.append(f"{command}: {e}")
            continue
        done.append((command, {"name": "cli_execute", "content": [c.model_dump(mode="json") for c in content]}))
    return done, skipped


def _baseline_decider(classifier: ClassifierLayer, select) -> SecurityDecider:
    """Session 14's content composition: every rule reads the whole text, the classifier reads what ``select`` keeps
    of it at the model's threshold (the baselines of this benchmark and of `content_documents.py`)."""
    rules = RulesLayerAdapter()
    return SecurityDecider(injections_only([rules, ContentRulesLayer(), DecodeLayer([rules, classifier]),
                                            *prose_only([classifier], select)]))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print what the shipped configuration withholds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir="/tmp") as root:
        Path(root, "data.bin").write_bytes(b"\0" * 4096)
        settings = CliSettings(approval_mode="ask", path_roots=[root])
        results, skipped = await _results(_commands(root), settings)
    probe = [json.loads(line) for line in PROBE.read_text(encoding="utf-8").splitlines() if line.strip()]
    injected = [row["text"] for row in probe if row["label"] == "attack"]
    documents = [row["text"] for row in probe if row["label"] == "benign"]
    model = SecurityClassifier.load(device="cpu")
    layer = ClassifierLayer(model, max_batch_size=32, max_wait_ms=2.0)
    whole = [tool_result_text(r) for _, r in results]
    checked = [tool_result_text(r, echoes_of={"command": c}) for c, r in results]
    configs = {"before": (_baseline_decider(layer, lambda t: t), whole),
               "echo": (_baseline_decider(layer, lambda t: t), checked),
               "shipped": (_judge(RulesLayerAdapter(), [], [layer]).content, checked)}  # the service's own decider
    out: dict[str, tuple[list, list, list]] = {}
    try:
        for name, (decider, texts) in configs.items():
            out[name] = (await asyncio.gather(*(decider.decide(t) for t in texts)),
                         await asyncio.gather(*(decider.decide(t) for t in injected)),
                         await asyncio.gather(*(decider.decide(t) for t in documents)))
    finally:
        await layer.close()
    n = len(results)
    print(f"machine: {machine()}; security model {model.model_info.version} (threshold {model.threshold:.3f})")
    print(f"command results run: {n} ({len(skipped)} skipped: not installed or refused); probe: {len(injected)} injected, "
          f"{len(documents)} benign documents")
    base = sum(not v.allowed for v in out["before"][0])
    for name, (commands, attacks, benign) in out.items():
        withheld = sum(not v.allowed for v in commands)
        ratio = f"{withheld / base:.2f}x before" if base else "-"
        print(f"  {name:8s} command results withheld {withheld:3d} of {n} ({ratio}); injected withheld "
              f"{sum(not v.allowed for v in attacks):3d} of {len(injected)}; benign documents withheld "
              f"{sum(not v.allowed for v in benign):3d} of {len(documents)}")
    for (command, _), text, v in zip(results, checked, out["shipped"][0], strict=True):
        if not v.allowed:
            print(f"  shipped withholds {command!r}: {v.layer} {v.score:.2f} {v.threat_category}")
            if args.show:
                print("    " + "\n    ".join(language_lines(text).splitlines()[:6]))
    for text, v in zip(injected, out["shipped"][1], strict=True):
        if v.allowed:
            print(f"  shipped passes an injected result: {text[:100]!r}")
    for text, v in zip(documents, out["shipped"][2], strict=True):
        if not v.allowed:
            print(f"  shipped withholds a benign document ({v.layer} {v.score:.2f}): {text[:100]!r}")
    for line in skipped:
        print(f"  skipped {line}")


if __name__ == "__main__":
    asyncio.run(main())
